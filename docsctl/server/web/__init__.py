"""docsctl's web pages, for people: search, a chunk inspector, explain and sources (see app.py)."""

from docsctl.server.web.app import create_app, create_routes, serve, warn_if_public

__all__ = ["create_app", "create_routes", "serve", "warn_if_public"]
