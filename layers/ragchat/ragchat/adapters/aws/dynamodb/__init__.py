"""DynamoDB adapters: DocumentStore, ConversationStore, Counters and WorkspaceStore on the low-level
client.

One module per store (:mod:`.documents`, :mod:`.conversations`, :mod:`.counters`,
:mod:`.workspaces`) over the shared plumbing in :mod:`.table`. The key design and access patterns
are written down next to the table definitions in :mod:`ragchat.adapters.aws.tables`.
"""

from ragchat.adapters.aws.dynamodb.conversations import DynamoConversationStore
from ragchat.adapters.aws.dynamodb.counters import DynamoCounters
from ragchat.adapters.aws.dynamodb.documents import DynamoDocumentStore
from ragchat.adapters.aws.dynamodb.workspaces import DynamoWorkspaceStore

__all__ = ["DynamoConversationStore", "DynamoCounters", "DynamoDocumentStore", "DynamoWorkspaceStore"]
