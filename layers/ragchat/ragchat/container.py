"""Moved to :mod:`ragchat.bootstrap` (kept while parallel branches land; removed with the dead code)."""

from ragchat.bootstrap import Container, ContainerFactory, LazyContainer, load_personas

__all__ = ["Container", "ContainerFactory", "LazyContainer", "load_personas"]
