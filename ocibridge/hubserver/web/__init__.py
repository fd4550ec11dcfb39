"""serve's web pages: the catalog, a model, its files, at the Hub's own web paths.

Server-rendered (Jinja2, autoescaped), one stylesheet, no script at all: a strict
Content-Security-Policy forbids any, so a hostile model card that slipped past the sanitizer
still runs nothing. :mod:`.pages` holds the routes, :mod:`.render` the templates and headers.
"""
