"""The validate stage: the model against published training and serving results (models/validation/)."""
