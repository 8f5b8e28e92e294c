"""Note tools for tool-use mode (docs/chat.md): ``search_notes`` / ``get_note``, confined to the caller, the
workspaces the conversation searches and its scope."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragchat.domain.models import Conversation, Hit, SearchFilter

if TYPE_CHECKING:
    from ragchat.ports import DocumentStore
    from ragchat.services.retrieval import Retriever


class ScopedNoteTools:
    """:class:`ragchat.ports.NoteTools` over the retriever's index and the document store."""

    def __init__(
        self,
        retriever: Retriever,
        documents: DocumentStore,
        conv: Conversation,
        workspaces: tuple[str, ...] = (),
    ) -> None:
        self._retriever = retriever
        self._documents = documents
        self._flt = SearchFilter(
            owner=conv.owner, collection=conv.collection, document_id=conv.document_id, owners=workspaces
        )

    def search_notes(self, query: str, limit: int) -> list[Hit]:
        vector = self._retriever.embedder.embed_query(" ".join(query.split()))
        return self._retriever.index.search(vector, self._flt, limit)

    def get_note(self, note_id: str) -> Hit | None:
        notes = [n for ws in self._flt.partitions for n in self._documents.get_notes(ws, [note_id])]
        if not notes:
            return None
        n = notes[0]
        if self._flt.document_id and n.document_id != self._flt.document_id:
            return None
        if self._flt.collection and n.collection != self._flt.collection:
            return None
        return Hit(
            id=n.id,
            score=1.0,
            text=n.text,
            document_id=n.document_id,
            chunk_index=n.chunk_index,
            collection=n.collection,
            owner=n.owner,
        )
