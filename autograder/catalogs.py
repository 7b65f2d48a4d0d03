"""The course's catalogs, compiled where they are needed, and the grader's words in a language.

The catalogs are Babel's ``.po`` files under ``locale/<language>/LC_MESSAGES/``, made and updated
by ``make translations`` (:mod:`courseware.messages`):

* ``messages.po``: what the course package says (``attention_course``: the checks, the mistakes
  they name, load_weights) and the words of the notebooks' visible tests. Compiled into every
  package a learner or the sandbox gets (:func:`compile_package_catalogs`; ``make install`` does
  it for the clone's own package).
* ``autograder.po``: the feedback page's words, the grader's notes to the student, and the words
  of the hidden tests. Never in the package: neither a learner's wheel nor the sandbox, where the
  student's code runs, may read the hidden tests' words.

The grader compiles both itself (Babel, from the ``.po`` files: no build step to forget), once per
change of a catalog, into its private cache folder (:func:`compiled`); a grading process reads the
compiled files with the standard library's ``gettext``. Fuzzy entries (the English changed since
the translation) are left out: their English is shown until a translator updates them.
"""

from __future__ import annotations

import gettext
import hashlib
import io
import os
import tempfile
from pathlib import Path

from layout import LOCALE

PACKAGE_DOMAIN = "messages"
GRADER_DOMAIN = "autograder"


def N_(text: str) -> str:
    """Marks ``text`` for ``autograder.po`` (Babel's keyword); it is translated where it is shown."""
    return text


def source(language: str, domain: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{domain}.po"


def languages() -> list[str]:
    """The languages that have catalogs (the folders of ``locale/``)."""
    return sorted(p.name for p in LOCALE.iterdir() if (p / "LC_MESSAGES").is_dir()) if LOCALE.is_dir() else []


def compiled_bytes(po: Path) -> bytes:
    """The ``.mo`` form of the catalog ``po`` (Babel; fuzzy entries left out)."""
    from babel.messages.mofile import write_mo  # Babel is the maintainers' and the grader's, never the learner's
    from babel.messages.pofile import read_po

    with open(po, "rb") as f:
        catalog = read_po(f)
    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)  # parallel writers each put a whole file


def package_catalogs() -> list[Path]:
    """The ``messages.po`` of every language: what a package of the course carries, compiled."""
    return [source(lang, PACKAGE_DOMAIN) for lang in languages() if source(lang, PACKAGE_DOMAIN).is_file()]


def compile_package_catalogs(package: Path) -> list[Path]:
    """Write ``package/locale/<language>/LC_MESSAGES/messages.mo`` for every language (``package``:
    an ``attention_course`` folder); return the files written."""
    written = []
    for po in package_catalogs():
        mo = package / "locale" / po.parent.parent.name / "LC_MESSAGES" / f"{PACKAGE_DOMAIN}.mo"
        _write_atomically(mo, compiled_bytes(po))
        written.append(mo)
    return written


def _cache() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "attention-course" / "catalogs"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o700)  # the grading user's own, as chapter_view's views
    return folder


def compiled(language: str, domain: str) -> Path | None:
    """The compiled catalog of ``domain`` in ``language``, made once per content of its ``.po``
    (in the grading user's cache folder, out of the sandbox's view); None when there is none."""
    po = source(language, domain)
    if not po.is_file():
        return None
    data = po.read_bytes()
    mo = _cache() / f"{language}-{domain}-{hashlib.sha256(data).hexdigest()[:16]}.mo"
    if not mo.is_file():
        _write_atomically(mo, compiled_bytes(po))
    return mo


def translation(language: str) -> gettext.NullTranslations:
    """Everything the grader may say to a student in ``language``: its own words and the tests'
    (hidden and visible) and the package's. Nothing to translate for English or an unknown language."""
    found: gettext.NullTranslations | None = None
    for domain in (GRADER_DOMAIN, PACKAGE_DOMAIN):
        mo = compiled(language, domain) if language in languages() else None
        if mo is None:
            continue
        with open(mo, "rb") as f:
            catalog = gettext.GNUTranslations(f)
        if found is None:
            found = catalog
        else:
            found.add_fallback(catalog)
    return found or gettext.NullTranslations()


def words(language: str):
    """``gettext`` of :func:`translation` (the same object while the catalogs do not change)."""
    key = (language, *(compiled(language, d) if language in languages() else None
                       for d in (GRADER_DOMAIN, PACKAGE_DOMAIN)))
    if key not in _words:
        _words[key] = translation(language).gettext
    return _words[key]


_words: dict = {}
