"""The River side: the cascade classifier, its stages, summaries and feature costs."""
