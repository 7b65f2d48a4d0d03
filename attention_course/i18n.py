"""The language of what the course package says to a learner: English unless a notebook asks.

A Chinese notebook's first cell calls ``use_language("zh_CN")``; a kernel that was not told
(restarted, then run from any other cell) reads the language from the notebook it runs, as the
grader does (:func:`follow_notebook`, when the package is imported). From then on, in that kernel,
the checks' failure messages, the mistakes they name and the package's other words come from
the catalog compiled from ``locale/zh_CN/LC_MESSAGES/messages.po`` (into ``attention_course/locale/``
by ``make install``, and into every chapter's wheel): the standard library's ``gettext``, nothing
else at run time. Nothing is guessed from the machine: a kernel that never calls
``use_language`` and runs no notebook that names a language speaks English, whatever its locale.

The test cells' own words are written in the notebook, in English: the ``name=`` given to a
check (``checks.check_close(..., name="softmax of a float32 array")``) or to a test's own
``check_*`` helper, an ``assert``'s message, the text of an ``AssertionError`` and of a
``print``. :func:`translate_source` (and, in a kernel, the cell transformer that
``use_language`` installs) gives a cell's code with only those strings replaced by their
translations: a string literal or f-string that builds such a message, directly or through a
variable that is used for nothing else (``name = "..."`` then ``name=name + " (...)"``).
Nothing else in the code changes, so no verdict can: a test passes or fails as in English.
A failing cell's traceback leaves out the package's own frames (:func:`without_package_frames`): it
would print their English source lines (the check's ``raise`` and the message before translation).
An f-string's translation must keep its placeholders (``{shape}``) exactly; one that does not
is ignored. The grader does the same for the hidden tests (:mod:`autograder.catalogs`).
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import functools
import gettext as _gettext
import json
import linecache
import os
import sys
import warnings
import weakref
from pathlib import Path
from typing import Callable, Iterator

ENGLISH = "en"
#: the languages of the course (the keys), each as it names itself
LANGUAGES = {"en": "English", "zh_CN": "简体中文"}
#: where a notebook says its language: ``nb.metadata["attention_course"]["language"]``
METADATA_KEY = "attention_course"
DOMAIN = "messages"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"

_active: dict = {"language": ENGLISH, "translation": _gettext.NullTranslations(), "helpers": {}, "told": False}
#: a notebook file larger than this is not read for its language (a learner's notebook is far smaller)
_LARGEST_NOTEBOOK = 64 * 2**20


def supported(code: object) -> str:
    """``code`` as one of :data:`LANGUAGES` (``"zh-CN"`` and ``"zh_cn"`` are ``"zh_CN"``), or
    English for anything else: a notebook's metadata is the learner's to write."""
    if isinstance(code, str):
        key = code.strip().replace("-", "_").lower()
        for known in LANGUAGES:
            if known.lower() == key:
                return known
    return ENGLISH


def notebook_language(metadata: object) -> str:
    """The language a notebook's metadata names, English when it names none or an unknown one.
    Never raises, whatever ``metadata`` holds."""
    section = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return supported(section.get("language") if isinstance(section, dict) else None)


def catalog(code: str, localedir: Path = LOCALE_DIR, domain: str = DOMAIN) -> _gettext.NullTranslations:
    """The compiled catalog ``localedir/<code>/LC_MESSAGES/<domain>.mo`` (nothing to translate for
    English); a missing one warns and translates nothing."""
    code = supported(code)
    if code == ENGLISH:
        return _gettext.NullTranslations()
    found = _gettext.translation(domain, localedir=str(localedir), languages=[code], fallback=True)
    if type(found) is _gettext.NullTranslations:
        warnings.warn(f"no compiled catalog {domain}.mo for {code} in {localedir}: messages stay in English "
                      "(in a clone of the course: make install)", stacklevel=3)
    return found


def use_language(code: str, translation: _gettext.NullTranslations | None = None) -> None:
    """Speak ``code`` (``"zh_CN"``; ``"en"`` or anything unknown: English) from now on in this
    process (:func:`language` says which was taken). ``translation`` replaces the package's own
    catalog (the grader passes its own, which holds the hidden tests' words too). In an IPython
    kernel, the cells run after this call get their test messages translated (:func:`translate_tree`).
    Returns nothing: the notebook's first cell shows no output for it."""
    _speak(code, translation)
    _active["told"] = True


def _speak(code: str, translation: _gettext.NullTranslations | None = None) -> None:
    code = supported(code)
    _active["language"] = code
    _active["translation"] = translation if translation is not None else catalog(code)
    _install_cell_translator(code != ENGLISH)
    _documented.clear()
    translate_docs()


# ----------------------------------------------------------------------------- what help() shows

#: the course package's modules whose docstrings are in the language spoken, and the English ones
_documented: set = set()
_english_docs: dict = {}
#: modules whose docstrings are not a learner's to read in a notebook (the course's solutions: the catalogs
#: of the exercises translate those)
_NOT_READ = ("attention_course.reference",)


def doc_paragraphs(doc: str) -> list[str]:
    """A docstring's paragraphs (``inspect.cleandoc``'s text cut at blank lines): each is one entry
    of the catalog."""
    import inspect

    return [p for p in inspect.cleandoc(doc).split("\n\n") if p.strip()]


def translated_doc(doc: str | None, translate: Callable[[str], str] | None = None) -> str | None:
    """``doc`` with each paragraph translated, or None when the catalog translates none of them
    (a paragraph of code alone is its own translation)."""
    translate = translate or gettext
    if not doc:
        return None
    paragraphs = doc_paragraphs(doc)
    done = [translate(p) for p in paragraphs]
    return "\n\n".join(done) if any(t != p for t, p in zip(done, paragraphs)) else None


def translate_docs() -> None:
    """Give the functions and classes of the course package's modules imported so far the
    docstrings of the language spoken (:func:`use_language`), where the catalog holds every
    paragraph of one (those the notebooks invite a learner to read, ``help(train_seq2seq)``); the
    English ones back in English. Run when the language changes and before each cell of a kernel
    that speaks another language (a module the cell imported is then done for the next one)."""
    for name, module in list(sys.modules.items()):
        if (not name.startswith("attention_course.") or name.startswith(_NOT_READ) or name in _documented
                or module is None):
            continue
        _documented.add(name)
        for obj in list(vars(module).values()):
            if not (callable(obj) and getattr(obj, "__module__", None) == name):
                continue
            english = _english_docs.setdefault(obj, getattr(obj, "__doc__", None))
            chinese = translated_doc(english) if _active["language"] != ENGLISH else None
            with contextlib.suppress(AttributeError, TypeError):
                obj.__doc__ = chinese or english


def notebook_file() -> Path | None:
    """The notebook file this IPython kernel runs, where its front end names it: Jupyter's server
    (``JPY_SESSION_NAME`` in the kernel's environment, ipykernel's ``__session__``: kept across a
    restart) or VS Code (``__vsc_ipynb_file__``); None outside a kernel or when none names an
    existing ``.ipynb``."""
    shell = _running_shell()
    names = getattr(shell, "user_ns", None)
    if not isinstance(names, dict):
        return None
    for candidate in (names.get("__vsc_ipynb_file__"), names.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            path = Path(candidate)
            try:
                if path.is_file():
                    return path
            except OSError:
                continue
    return None


def follow_notebook() -> str | None:
    """In a kernel nobody told a language (:func:`use_language`), speak the language of the
    notebook it runs (:func:`notebook_file`), read from its metadata as the grader reads it
    (:func:`notebook_language`): a Chinese notebook's kernel, restarted and run from its set-up
    cell or any later one, speaks Chinese. Returns the language taken, None when there is no
    notebook to read (then nothing changes). Never raises."""
    if _active["told"]:
        return None
    path = notebook_file()
    if path is None:
        return None
    try:
        if path.stat().st_size > _LARGEST_NOTEBOOK:
            return None
        metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata")
    except (OSError, ValueError, AttributeError):
        return None
    code = notebook_language(metadata)
    if code != _active["language"]:
        _speak(code)
    return code


def language() -> str:
    """The language this process speaks (:func:`use_language`)."""
    return _active["language"]


def gettext(message: str) -> str:
    """``message`` in the language of :func:`use_language` (itself when there is no translation)."""
    return _active["translation"].gettext(message)


_ = gettext


# ----------------------------------------------------------------------------- the tests' words

#: calls whose ``name=`` is the subject of a message: the checks, and a test's own ``check_*``
#: helpers; ``check_own_code``'s name is the exercise's, a key, not a message
_NOT_A_MESSAGE = {"check_own_code"}


#: a test's own helper -> (the positions, the names) of the parameters it only puts into a message
Helpers = dict[str, tuple[frozenset, frozenset]]


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _message_roots(tree: ast.AST, prints: bool = True, helpers: Helpers | None = None) -> Iterator[ast.expr]:
    """The expressions whose value is only ever a message's text (``print``'s arguments too, with
    ``prints``), and what is passed to a test's own helper for a parameter it only puts into a
    message (``helpers``: :func:`message_parameters`)."""
    helpers = helpers or {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            yield node.msg
        elif isinstance(node, ast.Call):
            called = _called(node)
            if called == "AssertionError" or called == "print" and prints:
                yield from node.args
                continue
            named = called and called not in _NOT_A_MESSAGE and (
                called.startswith("check_") or (isinstance(node.func, ast.Attribute)
                                                and isinstance(node.func.value, ast.Name)
                                                and node.func.value.id == "checks"))
            positions, names = helpers.get(node.func.id, ((), ())) if isinstance(node.func, ast.Name) else ((), ())
            for k, arg in enumerate(node.args):
                if isinstance(arg, ast.Starred):
                    break  # the positions after it are unknown
                if k in positions:
                    yield arg
            yield from (kw.value for kw in node.keywords if kw.arg in names or (named and kw.arg == "name"))


def _text_parts(expr: ast.expr, texts: list, uses: list) -> None:
    """Collect what builds the text of ``expr``: string literals and f-strings (``texts``), and
    the variables whose value goes into the text as it is (``uses``): ``a + "b"``, ``f"{a}"``,
    ``"%s" % a``, ``a if c else "b"``. Anything else (a call, an index) is left alone."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        texts.append(expr)
    elif isinstance(expr, ast.JoinedStr):
        texts.append(expr)
        for part in expr.values:
            if isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name):
                uses.append(part.value)
    elif isinstance(expr, ast.Name) and isinstance(expr.ctx, ast.Load):
        uses.append(expr)
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        _text_parts(expr.left, texts, uses)
        _text_parts(expr.right, texts, uses)
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        _text_parts(expr.left, texts, uses)
        for arg in expr.right.elts if isinstance(expr.right, ast.Tuple) else [expr.right]:
            if isinstance(arg, ast.Name):
                uses.append(arg)
    elif isinstance(expr, ast.IfExp):
        _text_parts(expr.body, texts, uses)
        _text_parts(expr.orelse, texts, uses)


def message_texts(tree: ast.AST, prints: bool = True, helpers: Helpers | None = None) -> list[ast.expr]:
    """The string literals and f-strings of ``tree`` that build a message and nothing else.

    Those in a message root (:func:`_message_roots`; ``helpers``: the test's own functions, with
    the parameters they only put into a message, :func:`message_parameters`), and those assigned
    (``=``, ``+=``) to a variable whose every use is in the text of a message: such a variable
    holds nothing but words. A variable bound any other way (a loop, a parameter, unpacking) is
    left alone."""
    return _words(tree, prints, {**(helpers or {}), **message_parameters(tree, helpers)})[0]


def _words(tree: ast.AST, prints: bool, helpers: Helpers, free: frozenset = frozenset()) -> tuple[list, set]:
    """The message texts of ``tree`` and the variables that hold only words; a name of ``free``
    (a function's parameter) may be one of them, its value being the caller's."""
    stores: dict[str, list] = collections.defaultdict(list)  # name -> the values it is given, None: other ways
    loads: dict[str, set] = collections.defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    stores[target.id].append(node.value if len(node.targets) == 1 else None)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            stores[node.target.id].append(node.value if isinstance(node.op, ast.Add) else None)
        elif isinstance(node, ast.arg):
            if node.arg not in free:
                stores[node.arg].append(None)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads[node.id].add(id(node))
    assigned = {id(t) for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])}
    for node in ast.walk(tree):  # a name stored by a loop, a with, unpacking, a comprehension...
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in assigned:
            stores[node.id].append(None)

    roots = list(_message_roots(tree, prints, helpers))
    words = {name for name in set(stores) | free
             if (stores[name] or name in free) and all(v is not None for v in stores[name])}
    while True:
        texts: list = []
        uses: list = []
        for root in roots + [v for name in sorted(words) for v in stores[name]]:
            _text_parts(root, texts, uses)
        used_in_text = {id(u) for u in uses}
        still = {name for name in words if loads[name] and loads[name] <= used_in_text}
        if still == words:
            break
        words = still
    seen, found = set(), []
    for text in texts:
        if id(text) not in seen:
            seen.add(id(text))
            found.append(text)
    return found, words


#: matplotlib's calls whose first argument is a figure's words, and those whose ``label=`` is (a legend's entry)
_FIGURE_TEXT_CALLS = {"set_title", "set_xlabel", "set_ylabel", "suptitle", "supxlabel", "supylabel", "title", "xlabel",
                      "ylabel"}
_LABELLED_CALLS = {"plot", "scatter", "bar", "barh", "hist", "step", "stairs", "fill_between", "axhline", "axvline",
                   "errorbar", "semilogx", "semilogy", "loglog", "imshow"}


def figure_texts(tree: ast.AST) -> list[ast.expr]:
    """The string literals and f-strings that are the words of a figure a cell draws with
    matplotlib: a title's, an axis label's (``ax.set_xlabel("bandwidth h")``), a legend entry's
    (``ax.plot(x, y, label="truth")``). Translated as the cell runs, where the figure can draw
    them (:func:`attention_course.plotting.figure_words`: a CJK font)."""
    roots = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _FIGURE_TEXT_CALLS:
                roots += node.args[:1]
            if node.func.attr in _LABELLED_CALLS:
                roots += [kw.value for kw in node.keywords if kw.arg == "label"]
    texts: list = []
    for root in roots:
        _text_parts(root, texts, [])
    return texts


def _figures_speak() -> bool:
    """Whether a figure drawn now can say its words in the language spoken (matplotlib is then set
    up to draw them): :func:`figure_words`."""
    try:
        return figure_words()
    except ImportError:  # no matplotlib: no figure to translate
        return False


# ----------------------------------------------------------------------------- the words of figures

#: Chinese fonts a figure may fall back on: the book's own first (Debian's fonts-wqy-microhei, as
#: book/_ext/translated_outputs.py draws the Chinese book's figures), then the usual ones of other systems
CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
             "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC", "Arial Unicode MS")


@functools.cache
def cjk_font() -> str | None:
    """The first of :data:`CJK_FONTS` matplotlib can draw with on this machine, found as the book
    finds its font: in matplotlib's list of fonts, else in the system's font folders (matplotlib's
    cached list never sees a font installed after it was written: such a font is registered by
    its path); None when there is none."""
    from matplotlib import font_manager  # here: the tests' words need no matplotlib

    known = {font.name for font in font_manager.fontManager.ttflist}
    if not known & set(CJK_FONTS):
        known = add_system_fonts(CJK_FONTS)
    return next((name for name in CJK_FONTS if name in known), None)


def add_system_fonts(families) -> set[str]:
    """Register with matplotlib every font file of the system's font folders that holds one of
    ``families`` (matplotlib's cached list of fonts never sees a font installed after it was
    written); the names of the fonts matplotlib then knows. The book's Chinese build
    (book/_ext/translated_outputs.py) finds its fonts with it too."""
    from matplotlib import font_manager, ft2font

    manager, wanted = font_manager.fontManager, set(families)
    for path in font_manager.findSystemFonts():
        try:
            first = ft2font.FT2Font(path)
            faces = [first] + [ft2font.FT2Font(path, face_index=i) for i in range(1, first.num_faces)]
        except (OSError, RuntimeError):  # a file FreeType cannot read is no font of ours
            continue
        if wanted & {face.family_name for face in faces}:
            manager.addfont(path)
    return {font.name for font in manager.ttflist}


_noted: set = set()  # the languages whose learner was told that the figures stay English


def figure_words() -> bool:
    """Whether a figure drawn now says its words translated: in English, no (they are English);
    in Chinese, where a CJK font is found (:func:`cjk_font`), which matplotlib then falls back on
    for every text (the Latin letters keep their own font). Where none is, the figures keep their
    English words (never boxes for missing glyphs) and the learner is told so once, in Chinese."""
    language = _active["language"]
    if language == ENGLISH:
        return False
    import matplotlib  # here: the tests' words need no matplotlib

    font = cjk_font()
    if font is None:
        if language not in _noted:
            _noted.add(language)
            print(gettext("no Chinese font on this machine, so the figures' words stay English (install one "
                          "of {fonts}, then restart the kernel)").format(fonts=", ".join(CJK_FONTS[:3])))
        return False
    family = list(matplotlib.rcParams["font.family"])
    if font not in family:
        matplotlib.rcParams["font.family"] = [*family, font]
    return True


def figure_text(english: str) -> str:
    """A word of one of the package's figures (a title, a label, a legend's entry): translated
    when :func:`figure_words` allows, else the English. An f-string's text is formatted after:
    ``figure_text("{n} steps").format(n=n)``."""
    return gettext(english) if figure_words() else english




def _clause(key: ast.expr | None) -> bool:
    """A string or an f-string with a space in its text: a clause, not a name."""
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str) and " " in key.value
    return isinstance(key, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and " " in v.value for v in key.values)


def mistake_texts(tree: ast.AST) -> list[ast.expr]:
    """The keys (string literals and f-strings: ``f"... sqrt({D}) ..."``) of every dict display
    whose keys are all clauses: the mistakes a test names to ``checks.check_close(likely=...)``
    (directly, or through a variable or a helper that returns them). Words, translated in place as
    a check's ``name=`` is, so that an f-string's values fill the translation's placeholders; a
    dict with a key that is not a clause (``{"qkv": ..., "every third": ...}``) is a table, left alone."""
    return [key for node in ast.walk(tree) if isinstance(node, ast.Dict) and node.keys
            and all(_clause(k) for k in node.keys) for key in node.keys]


def message_parameters(tree: ast.AST, known: Helpers | None = None) -> Helpers:
    """The functions ``tree`` defines whose parameters go only into the text of a message, e.g.
    ``def check_rule(largest, allowed, name): assert ..., f"{name} created ..."``: what a test
    passes there (``check_rule(largest, allowed, "tiled_attention_forward of ...")``) is words,
    as a check's ``name=`` is. ``known``: helpers defined before (in an earlier cell), which these
    may call."""
    found: Helpers = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        free = frozenset(positional + [a.arg for a in args.kwonlyargs])
        _, words = _words(node, False, {**(known or {}), **found}, free)
        if words & free:
            found[node.name] = (frozenset(k for k, a in enumerate(positional) if a in words), frozenset(words & free))
    return found


def copy_tree(node):
    """A copy of the syntax tree ``node`` made from its fields and positions alone.
    ``copy.deepcopy`` would also copy whatever other code hung on the nodes: ``executing``, which
    IPython's tracebacks use, sets a ``parent`` on every node it reads, the shared ``ast.Load()``
    and ``ast.Store()`` included, so that after a kernel's first traceback each deep copy of a
    name dragged along the whole file that traceback last read (75 s instead of 3 s for the
    translation test of every notebook cell)."""
    if isinstance(node, list):
        return [copy_tree(item) for item in node]
    if not isinstance(node, ast.AST):
        return node
    fields = {name: copy_tree(getattr(node, name)) for name in node._fields if hasattr(node, name)}
    return type(node)(**fields, **{name: getattr(node, name) for name in node._attributes if hasattr(node, name)})


def _placeholder(part: ast.FormattedValue) -> str:
    text = "{" + ast.unparse(part.value)
    if part.conversion != -1:
        text += "!" + chr(part.conversion)
    if part.format_spec is not None:
        text += ":" + "".join(v.value if isinstance(v, ast.Constant) else _placeholder(v)
                              for v in part.format_spec.values)
    return text + "}"


def msgid(text: ast.expr) -> str:
    """The catalog's key for a string literal (itself) or an f-string (its text, each
    placeholder written as in the code: ``"weights of shape {tuple(w.shape)}"``)."""
    if isinstance(text, ast.Constant):
        return text.value
    return "".join(v.value.replace("{", "{{").replace("}", "}}") if isinstance(v, ast.Constant)
                   else _placeholder(v) for v in text.values)


def _translated_fstring(text: ast.JoinedStr, translated: str) -> list | None:
    """The parts of ``text`` rebuilt from its translation, with its own placeholders (the same
    ones, each as often); None when the translation's placeholders differ from the original's."""
    own = {_placeholder(v): v for v in text.values if isinstance(v, ast.FormattedValue)}
    wanted = collections.Counter(_placeholder(v) for v in text.values if isinstance(v, ast.FormattedValue))
    longest_first = sorted(own, key=len, reverse=True)
    parts, literal, used, i = [], [], collections.Counter(), 0
    while i < len(translated):
        if translated.startswith(("{{", "}}"), i):
            literal.append(translated[i])
            i += 2
        elif translated[i] == "{":
            match = next((p for p in longest_first if translated.startswith(p, i)), None)
            if match is None:
                return None
            if literal:
                parts.append(ast.Constant("".join(literal)))
                literal = []
            parts.append(copy_tree(own[match]))
            used[match] += 1
            i += len(match)
        elif translated[i] == "}":
            return None
        else:
            literal.append(translated[i])
            i += 1
    if literal:
        parts.append(ast.Constant("".join(literal)))
    return parts if used == wanted else None


def translate_tree(tree: ast.AST, translate: Callable[[str], str] | None = None,
                   helpers: Helpers | None = None) -> ast.AST:
    """``tree`` (changed in place) with the strings of :func:`message_texts`,
    :func:`mistake_texts` and (where a figure can draw them) :func:`figure_texts` translated by
    ``translate`` (default: :func:`gettext`). ``helpers``: the test's own helpers defined in other
    cells (:func:`message_parameters`); by default those of the cells translated so far in this
    process (a kernel's, the grader's), to which this tree's are added."""
    translate = translate or gettext
    if helpers is None:
        helpers = _active["helpers"]
        helpers.update(message_parameters(tree, helpers))
    figures = figure_texts(tree)
    if figures and not _figures_speak():
        figures = []
    for text in message_texts(tree, helpers=helpers) + mistake_texts(tree) + figures:
        key = msgid(text)
        translated = translate(key)
        if translated == key:
            continue
        if isinstance(text, ast.Constant):
            text.value = translated
        else:
            parts = _translated_fstring(text, translated)
            if parts is not None:
                text.values = parts
    return ast.fix_missing_locations(tree)


def translated_lines(source: str, translate: Callable[[str], str] | None = None) -> str:
    """A cell's code as a traceback prints it in a kernel that speaks another language: line for
    line the same, each message text that fits on one line (:func:`message_texts`,
    :func:`mistake_texts`) replaced by its translation, as the cell ran it (:func:`translate_tree`,
    with the helpers known so far); unchanged when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    helpers = dict(_active["helpers"])
    helpers.update(message_parameters(tree, helpers))
    texts = {id(t): t for t in message_texts(tree, helpers=helpers) + mistake_texts(tree) if t.lineno == t.end_lineno}
    before = {key: ast.unparse(text) for key, text in texts.items()}
    translate_tree(tree, translate, helpers=helpers)
    lines = source.splitlines(keepends=True)
    for key, text in sorted(texts.items(), key=lambda item: (item[1].lineno, item[1].col_offset), reverse=True):
        after = ast.unparse(text)
        if after != before[key]:
            line = lines[text.lineno - 1].encode()  # the offsets count UTF-8 bytes
            written = line[text.col_offset:text.end_col_offset].decode()
            lines[text.lineno - 1] = (line[:text.col_offset] + _quoted_as(written, after).encode()
                                      + line[text.end_col_offset:]).decode()
    return "".join(lines)


def _quoted_as(written: str, literal: str) -> str:
    """``literal`` (``ast.unparse``'s, in single quotes) in the double quotes ``written`` used, where
    it holds none: the line reads as the cell wrote it."""
    prefix = len(literal) - len(literal.lstrip("rbfuRBFU"))
    body = literal[prefix + 1:-1]
    if written.lstrip("rbfuRBFU").startswith('"') and literal[prefix:prefix + 1] == "'" and '"' not in body:
        return literal[:prefix] + '"' + body.replace("\\'", "'") + '"'
    return literal


def translate_source(source: str, translate: Callable[[str], str] | None = None) -> str:
    """A cell's code with its messages translated (:func:`translate_tree`); unchanged when it
    does not parse or there is nothing to translate."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    before = ast.dump(tree)
    tree = translate_tree(tree, translate)
    return source if ast.dump(tree) == before else ast.unparse(tree)


class CellTranslator(ast.NodeTransformer):
    """IPython's hook (``shell.ast_transformers``): every cell run in the kernel gets its test
    messages translated. It never fails a cell: on any error the cell runs as written."""

    def visit(self, node: ast.AST) -> ast.AST:
        try:
            translate_docs()  # the modules an earlier cell imported
            return translate_tree(node)
        except Exception:  # noqa: BLE001 - a translation must never stop a learner's cell
            return node


def _running_shell():
    """The IPython shell running the current cell (it puts ``get_ipython`` among the builtins
    while a cell runs), else the process's own; None outside IPython."""
    getter = getattr(builtins, "get_ipython", None)
    if getter is None:
        ipython = sys.modules.get("IPython")  # not imported: not a kernel
        getter = getattr(ipython, "get_ipython", None)
    try:
        return getter() if getter is not None else None
    except Exception:  # noqa: BLE001 - no shell
        return None


def _install_cell_translator(on: bool) -> None:
    shell = _running_shell()
    if shell is None or not hasattr(shell, "ast_transformers"):
        return
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, CellTranslator)]
    if on:
        shell.ast_transformers.append(CellTranslator())
    if not hasattr(shell, "set_custom_exc"):
        return
    if on:
        shell.set_custom_exc((Exception,), _show_error)
        _active["shell"] = weakref.ref(shell)  # not kept alive by the package
    elif (_active.pop("shell", None) or (lambda: None))() is shell:
        shell.set_custom_exc((), None)  # IPython's own handling, as before


# ----------------------------------------------------------------------------- what a traceback shows

_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


def without_package_frames(tb, keep_first: bool = False):
    """The traceback ``tb`` without the frames of the course package's own code (the check that
    raised, the helpers between a test and the learner's code); its first entry stays with
    ``keep_first`` (the shell's own, which IPython does not show). A traceback prints each frame's
    source lines, and the package's are English: its messages before translation, its comments.
    What is left: the cell's line that called the check, and any frame of the learner's or a
    library's code. The entries are relinked in place; returns the first one kept (None if none)."""
    kept, entry = [], tb
    while entry is not None:
        if (keep_first and entry is tb) or not entry.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            kept.append(entry)
        entry = entry.tb_next
    for earlier, later in zip(kept, kept[1:] + [None]):
        earlier.tb_next = later
    return kept[0] if kept else None


def _show_error(shell, etype, value, tb, tb_offset=None):
    """IPython's handler of a cell's error in a kernel that speaks another language than English
    (``shell.set_custom_exc``): the usual traceback without the package's frames
    (:func:`without_package_frames`), and so without English source lines; the same for the
    exceptions it was raised from. A cell's lines are printed with their messages translated, as
    the cell ran them (:func:`translated_lines`). A syntax error has no frame of the package: shown as IPython
    shows it, while the cell is compiled or run."""
    if issubclass(etype, SyntaxError):
        shell.showsyntaxerror(running_compiled_code=tb is not None and tb.tb_frame.f_code.co_name == "run_code")
        return
    tracebacks, error = [without_package_frames(tb, keep_first=True)], value.__cause__ or value.__context__
    seen = {id(value)}
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = without_package_frames(error.__traceback__)
        tracebacks.append(error.__traceback__)
        error = error.__cause__ or error.__context__
    cells, shown = getattr(getattr(shell, "compile", None), "_filename_map", {}), {}
    for entry in tracebacks:
        while entry is not None:
            name = entry.tb_frame.f_code.co_filename
            if name in cells and name not in shown and isinstance(linecache.cache.get(name), tuple):
                shown[name] = linecache.cache[name]
                size, mtime, lines, full = shown[name]
                linecache.cache[name] = (size, mtime, translated_lines("".join(lines)).splitlines(keepends=True), full)
            entry = entry.tb_next
    try:
        shell.showtraceback((etype, value, tracebacks[0]), tb_offset=tb_offset, running_compiled_code=True)
    finally:
        linecache.cache.update(shown)  # the cell's own lines again, for anything that reads them later
