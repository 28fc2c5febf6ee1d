"""The plan: how many NeuronCores hold a model's weights, and how it is split over them (TP / EP).

Taught in notebook 04.
"""
