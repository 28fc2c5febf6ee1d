"""What people see: the explorer (views, detail pane), plots, and the Voila app.

Taught in notebooks 01 and 05.
"""
