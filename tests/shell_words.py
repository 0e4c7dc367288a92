"""The commands and absolute paths a bash script uses, read from its text (no bash parser on PyPI
reads these scripts: bashlex stops at their heredocs and arithmetic).

A small lexer, enough for the scripts this project renders: it drops comments, heredoc bodies (the
inlined Python programs) and quoted text outside ``$(...)``, splits at the shell's command
separators, and takes the first word of each simple command (after assignments, redirections and
the keywords and wrappers ``exec``, ``command``, ``timeout``, ``!``). Case patterns and ``for``
lists are skipped; words that are expansions (``"${on_stop}"``) are dynamic and not named.
"""

from __future__ import annotations

import re

KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case", "esac", "in", "function", "{", "}", "!", "[[", "]]"}
BUILTINS = {
    ".", ":", "[", "alias", "bg", "break", "builtin", "cd", "command", "compgen", "continue", "declare", "echo", "eval", "exec",
    "exit", "export", "false", "fg", "getopts", "hash", "jobs", "kill", "let", "local", "printf", "pwd", "read", "readonly",
    "return", "set", "shift", "shopt", "source", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unset", "wait",
}  # fmt: skip
_HEREDOC = re.compile(r"<<-?\s*'?\"?([A-Za-z_]+)'?\"?")
_FUNCTION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)\s*\{", re.M)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_REDIRECT = re.compile(r"^[0-9]*(>>?|<<?|&>|>&|<&)")
_PATH = re.compile(r"(?<![\w.$}:/*-])(?<!}\")(?<!}')(/(?:[A-Za-z0-9_.+-]+/?)+)")


def _drop_heredocs(text: str) -> str:
    out, end = [], None
    for line in text.splitlines():
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        match = _HEREDOC.search(line)
        if match and "<<<" not in line:
            end = match.group(1)
        out.append(line)
    return "\n".join(out)


def _segments(text: str) -> list[list[str]]:
    """Simple commands as word lists. Quoted text is dropped from words (a word that was only
    quotes becomes ``''``); a ``$(...)``, inside double quotes or not, is lexed as its own
    commands and stands as ``$(...)`` in the word around it."""
    segments: list[list[str]] = []
    current: list[str] = []
    word: list[str] = []
    in_word = False
    # what a $( interrupted: the command around it, its word, and whether it sat inside "..."
    outer: list[tuple[list[str], list[str], bool, bool]] = []
    in_quotes = False
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word, in_word
        if in_word:
            current.append("".join(word))
        word, in_word = [], False

    def end_segment() -> None:
        nonlocal current
        end_word()
        if current:
            segments.append(current)
        current = []

    def open_substitution() -> None:
        nonlocal current, word, in_word, in_quotes
        outer.append((current, word, in_word, in_quotes))
        current, word, in_word, in_quotes = [], [], False, False

    while i < n:
        c = text[i]
        if in_quotes:
            if c == "\\":
                i += 2
            elif c == '"':
                in_quotes = False
                i += 1
            elif text.startswith("$((", i):
                i = _skip_arithmetic(text, i)
            elif text.startswith("$(", i):
                open_substitution()
                i += 2
            else:
                i += 1
            continue
        if text.startswith("\\\n", i):
            end_word()
            i += 2
            continue
        if c == "\\":
            word.append(text[i : i + 2])
            in_word = True
            i += 2
            continue
        if c == "'":
            i = text.index("'", i + 1) + 1
            in_word = True
            continue
        if c == '"':
            in_quotes = True
            in_word = True
            i += 1
            continue
        if c == "#" and not in_word:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("$((", i) or (text.startswith("((", i) and not in_word):
            i = _skip_arithmetic(text, i)
            word.append("$((...))")
            in_word = True
            continue
        if text.startswith("${", i):
            j = _match_brace(text, i + 1)
            word.append(text[i : j + 1])
            in_word = True
            i = j + 1
            continue
        if text.startswith("$(", i):
            open_substitution()
            i += 2
            continue
        if c == "(" and in_word and "".join(word).endswith("="):
            # NAME=(words ...): an array assignment, no command
            depth, j = 0, i
            while j < n:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            word.append("(...)")
            i = j + 1
            continue
        if c == ")" and outer:
            end_segment()
            current, word, in_word, in_quotes = outer.pop()
            word.append("$(...)")
            in_word = True
            i += 1
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        if c in "<>" or (c == "&" and (text[i - 1 : i] == ">" or text[i + 1 : i + 2] == ">")):
            # redirections (> file, 2>&1, &> file, >&2) stay words
            j = i
            while j < n and text[j] in "<>&0123456789":
                j += 1
            word.append(text[i:j])
            in_word = True
            i = j
            continue
        if c in "{}" and (in_word or text[i + 1 : i + 2] not in " \n;"):
            word.append(c)
            in_word = True
            i += 1
            continue
        if c in "\n;|&(){}":
            end_segment()
            i += 1
            continue
        word.append(c)
        in_word = True
        i += 1
    end_segment()
    return segments


def _match_brace(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced ${{ at {i}")


def _skip_arithmetic(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced (( at {i}")


def _drop_case_patterns(text: str) -> str:
    # `case W in PATTERN) ...;; PATTERN) ... esac`: the patterns are no commands
    text = re.sub(r"(\bcase\b[^\n]*?\bin)\s+[^()\n]*\)", r"\1 ", text)
    return re.sub(r";;\s*[^()\n;]*\)", ";; ", text)


def command_words(text: str) -> set[str]:
    """The commands ``text`` runs (functions it defines included)."""
    body = _drop_case_patterns(_drop_heredocs(text))
    found: set[str] = set()
    for words in _segments(body):
        i = 0
        while i < len(words):
            w = words[i]
            if _ASSIGNMENT.match(w) or _REDIRECT.match(w) or w in KEYWORDS:
                i += 1
                continue
            if w == "for" or w == "select":
                break  # `for NAME in WORDS`: no command until the separator
            if w in ("exec", "command") and i + 1 < len(words) and not words[i + 1].startswith("-"):
                found.add(w)
                i += 1
                continue
            if w == "timeout":
                found.add(w)
                i += 1
                while i < len(words) and words[i].startswith("-"):
                    i += 2 if words[i] in ("-k", "-s") else 1
                i += 1  # the duration
                continue
            if "$" in w or w in ("", "''"):
                if w.startswith("${") and w.endswith("}") and ":-" in w:
                    i += 1  # ${WRAPPER:-command} python3 ...: the next word runs too
                    continue
                break
            found.add(w)
            break
    return found


def defined_functions(text: str) -> set[str]:
    return set(_FUNCTION.findall(_drop_heredocs(text)))


def absolute_paths(text: str) -> set[str]:
    """Absolute path literals of the script (its prelude's values included), without heredoc
    bodies and comments."""
    kept = []
    # awk programs: their /regex/ is no path
    for line in re.sub(r"\bawk(\s+-\S+)*\s+'[^']*'", "awk", _drop_heredocs(text)).splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            continue
        kept.append(re.sub(r"\s#\s.*$", "", line))
    return {m.rstrip("/") or "/" for m in _PATH.findall("\n".join(kept))}
