"""The course's licences (LICENSE: the code, MIT; LICENSE-TEXT: the prose and the figures, CC BY
4.0) agree wherever they are stated, and every pinned dependency's licence allows what the course
does with it: a permissive licence, or one of the few others named below with why it is acceptable.
A new pin in requirements.txt or package.json whose licence is neither fails here. Reads the
installed packages' metadata (importlib.metadata) and package-lock.json: no network, a fraction of
a second."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml

import notebook_tools as nbt

# Licences that ask only for their notice to be kept: any pinned package may have them.
PERMISSIVE = {
    "MIT", "MIT-0", "MIT-CMU", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "ISC", "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception", "BSL-1.0", "Zlib", "PSF-2.0", "CC0-1.0",
    "BSD",  # a classifier or License field that does not say which BSD licence: each is permissive
    "LicenseRef-Public-Domain",
}

# The others, each for the packages named and the reason given; a new package under one of these
# licences must be added here by hand, with its reason.
ACCEPTED = {
    "MPL-2.0": ("file-level copyleft: only changes to the package's own files would have to be published "
                "under the MPL; the course uses them unchanged and ships none of them (certifi: the CA "
                "bundle of requests; fqdn: a jsonschema format check; tqdm: the training loop's progress "
                "bar, a dependency of the learner's wheel, installed by pip from PyPI)",
                {"certifi", "fqdn", "tqdm"}),
    "LGPL-3.0-only": ("psycopg is used as a library, unchanged, installed by pip from PyPI for PostgreSQL "
                      "gradebooks; the LGPL lets code under any licence use it, and the course ships none of it",
                      {"psycopg", "psycopg-binary"}),
    "GPL-3.0-or-later": ("docutils' classifiers name the GPL for one file of its source distribution only, "
                         "tools/editors/emacs/rst.el (an Emacs mode, not in the wheel; COPYING.txt); the rest is "
                         "public domain, BSD, PSF or ZPL",
                         {"docutils"}),
}

# package.json: npm packages, loaded by the browser tests only (never in the book or a wheel).
ACCEPTED_NPM = {
    "MPL-2.0": ("axe-core, the accessibility rules the browser tests inject into the pages: test-only, "
                "used unchanged, never published with the book", {"axe-core"}),
}

# What packages write in their License field or classifiers, as SPDX identifiers.
SPELLINGS = {
    "apache 2.0": "Apache-2.0", "apache software license": "Apache-2.0", "apache license, version 2.0": "Apache-2.0",
    "osi approved :: apache software license": "Apache-2.0",
    "mit license": "MIT", "osi approved :: mit license": "MIT",
    "bsd 3-clause license": "BSD-3-Clause", "bsd 2-clause license": "BSD-2-Clause", "osi approved :: bsd license": "BSD",
    "isc license": "ISC", "osi approved :: isc license (iscl)": "ISC",
    "psfl": "PSF-2.0", "osi approved :: python software foundation license": "PSF-2.0",
    "osi approved :: mozilla public license 2.0 (mpl 2.0)": "MPL-2.0",
    "osi approved :: gnu general public license (gpl)": "GPL-3.0-or-later",
    "public domain": "LicenseRef-Public-Domain",
}


SPDX_EXPRESSION = re.compile(r"[A-Za-z0-9.+-]+(?: (?:AND|OR|WITH) [A-Za-z0-9.+-]+)*")


def _spdx(name: str) -> str:
    return SPELLINGS.get(name.strip().lower(), name.strip())


def declared_licences(dist: importlib.metadata.Distribution) -> list[list[str]]:
    """What a distribution's metadata says of its licence, as alternatives (``OR``) of conjunctions
    (``AND``) of SPDX identifiers. Its ``License-Expression`` when it has one; else its License
    field when that names a licence (not a copyright line or a licence's whole text); else its license classifiers, all of
    which apply (a package that lists several ships files under each)."""
    meta = dist.metadata
    text = meta.get("License-Expression") or ""
    field = (meta.get("License") or "").strip()
    if not text and (field.lower() in SPELLINGS or SPDX_EXPRESSION.fullmatch(field)) and field.upper() != "UNKNOWN":
        text = field
    if text:
        return [[_spdx(term) for term in re.split(r"\s+AND\s+", alternative.strip("() "))]
                for alternative in re.split(r"\s+OR\s+", text)]
    classifiers = [c.split(" :: ", 1)[1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return [[_spdx(c) for c in classifiers]] if classifiers else []


def refusal(package: str, alternatives: list[list[str]], accepted: dict) -> str | None:
    """Why ``package`` may not be pinned under ``alternatives`` (:func:`declared_licences`), or
    None when one alternative is all permissive or accepted for it."""
    if not alternatives:
        return f"{package}: its metadata names no licence"
    for terms in alternatives:
        if all(t in PERMISSIVE or package in accepted.get(t, ("", set()))[1] for t in terms):
            return None
    return f"{package}: {' OR '.join(' AND '.join(terms) for terms in alternatives)} is not in tests/test_licences.py's lists"


def pinned_requirements() -> list[str]:
    names = []
    for line in (nbt.ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0])
    return names


def npm_packages() -> dict[str, str]:
    """Every npm package package-lock.json installs, with its licence."""
    lock = json.loads((nbt.ROOT / "package-lock.json").read_text())
    return {path.rsplit("node_modules/", 1)[1]: entry.get("license", "")
            for path, entry in lock["packages"].items() if path}


def test_every_pinned_python_package_has_a_licence_the_course_allows():
    problems, seen = [], {}
    for name in pinned_requirements():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}: pinned in requirements.txt but not installed (make install)")
            continue
        seen[name] = declared_licences(dist)
        problems.append(refusal(name, seen[name], ACCEPTED))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)
    others = {n: a for n, a in seen.items() if not any(all(t in PERMISSIVE for t in terms) for terms in a)}
    print(f"{len(seen)} pinned packages, {len(seen) - len(others)} permissive; accepted otherwise: "
          + "; ".join(f"{n} ({' OR '.join(' AND '.join(t) for t in a)})" for n, a in sorted(others.items())))


def test_every_npm_package_has_a_licence_the_course_allows():
    packages = npm_packages()
    assert packages, "package-lock.json lists no package"
    problems = [refusal(name, [[licence]] if licence else [], ACCEPTED_NPM) for name, licence in packages.items()]
    assert not any(problems), "\n".join(p for p in problems if p)
    print("npm: " + ", ".join(f"{name} ({licence})" for name, licence in sorted(packages.items())))


@pytest.mark.parametrize("package, alternatives, verdict", [
    ("copydetect", [["MIT"]], None),
    ("gpl-thing", [["GPL-3.0-only"]], "gpl-thing: GPL-3.0-only is not in tests/test_licences.py's lists"),
    ("agpl-or-mit", [["AGPL-3.0-only"], ["MIT"]], None),  # an OR: the permissive alternative applies
    ("mpl-and-mit", [["MPL-2.0", "MIT"]], "mpl-and-mit: MPL-2.0 AND MIT is not in tests/test_licences.py's lists"),
    ("tqdm", [["MPL-2.0", "MIT"]], None),  # the same licence, accepted for this package only
    ("silent", [], "silent: its metadata names no licence"),
])
def test_the_check_refuses_what_its_lists_do_not_allow(package, alternatives, verdict):
    assert refusal(package, alternatives, ACCEPTED) == verdict


def test_a_license_field_that_holds_a_whole_licence_text_falls_back_to_the_classifiers():
    matplotlib = declared_licences(importlib.metadata.distribution("matplotlib"))
    assert matplotlib == [["PSF-2.0"]]
    assert declared_licences(importlib.metadata.distribution("packaging")) == [["Apache-2.0"], ["BSD-2-Clause"]]


def test_the_licences_are_stated_alike_everywhere():
    project = tomllib.loads((nbt.ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (nbt.ROOT / "LICENSE").read_text().startswith("MIT License\n")
    text = (nbt.ROOT / "LICENSE-TEXT").read_text()
    assert "Attribution 4.0 International" in text and "course notes" in text
    citation = yaml.safe_load((nbt.ROOT / "CITATION.cff").read_text())
    assert citation["version"] == project["version"] and set(citation["license"]) == {"MIT", "CC-BY-4.0"}
    intro = (nbt.ROOT / "book" / "intro.md").read_text()
    assert f"version {project['version']}, " in intro and "CC BY 4.0" in intro and "MIT License" in intro
    footer = yaml.safe_load((nbt.ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    assert "creativecommons.org/licenses/by/4.0/" in footer and "MIT License" in footer and "course notes" in footer
    checked = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                              "vendor.citation-file-format", str(nbt.ROOT / "CITATION.cff")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
