"""The composition roots: the one place where settings are read and every adapter and service is
constructed and injected (services never construct services; routes and handlers receive what they
use). Split by feature:

- :mod:`.backends` — settings, clock, personas and the ports (stores, blobs, embedder, index);
- :mod:`.models` — the chat model, the passage-vector cache and the evidence store it shares;
- :mod:`.ingestion` — submitting, the steps, the launcher, uploads, documents, evidence warming;
- :mod:`.chat` — retrieval, the model caller, the answerer and the chat collaborators;
- :mod:`.web` — all of them (:class:`Container`), the route rate limits, :class:`LazyContainer`.
"""

from ragchat.bootstrap.backends import load_personas
from ragchat.bootstrap.chat import Chat, build_chat
from ragchat.bootstrap.web import Container, ContainerFactory, LazyContainer

__all__ = ["Chat", "Container", "ContainerFactory", "LazyContainer", "build_chat", "load_personas"]
