"""State: key-value stores, their ``.checkpoint`` files, and their restoration from changelogs.

Modules: ``stores`` (the Rust-backed stores, ``process_next``, and ``holds_data`` /
``wipe_store``), ``checkpoint`` (``OffsetCheckpoint``), ``restorer`` (``StateRestorer``,
``StateRestoreListener``), ``changelog_reader`` (``StoreChangelogReader``; its bookkeeping in
``changelog_progress``), ``topic_restore``
(a whole changelog topic into a state directory, what ``streamstate restore`` runs),
``caching`` (the record cache), ``transaction_buffer`` (exactly-once's uncommitted writes) and
``write_buffer`` (what those two share).
The runtime (``streamstate.app``) and Spark (``streamstate.spark``) build on this package; it
imports neither. Users import these names from ``streamstate`` itself.
"""
