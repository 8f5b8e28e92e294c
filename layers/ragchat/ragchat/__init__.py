"""ragchat: a retrieval-augmented chat backend that runs on AWS and on a laptop."""

__version__ = "0.1.0"
