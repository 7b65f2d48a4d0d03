"""Placeholder: replaced by the book-infrastructure work."""


def setup(app):
    return {"parallel_read_safe": True}
