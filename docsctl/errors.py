"""The one exception tree of docsctl.

DocsctlError            anything a user can act on; the CLI prints its message on one line, exit 1
├── ConfigError         bad settings, unknown source or category, bad flag values
├── ExtractError        a file that cannot be turned into text (the indexer skips and counts it)
├── StoreError          the search backend failed or is unreachable
│   └── IndexMissingError   nothing has been indexed yet
├── NodeError           the local OpenSearch node could not be installed, started or stopped
└── NotFoundError       an unknown chunk id, path or name
"""


class DocsctlError(Exception):
    """Base of every error docsctl raises on purpose; the message is meant for the user."""


class ConfigError(DocsctlError):
    pass


class ExtractError(DocsctlError):
    pass


class StoreError(DocsctlError):
    pass


class IndexMissingError(StoreError):
    pass


class NodeError(DocsctlError):
    pass


class NotFoundError(DocsctlError):
    pass


class LockedError(DocsctlError):
    pass
