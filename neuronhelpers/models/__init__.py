"""What a person typed -> a checkpoint to load: resolving a model argument (Hub id, local folder, twin),
the Selected list, and the Hub's Trending / Downloads rankings.

Taught in notebooks 01 (rankings, Selected) and 02 (resolving a model).
"""
