"""Values as error messages show them: short, and printable however large."""

from __future__ import annotations

import math

__all__ = ["said", "shown"]

#: Digits beyond which an int is shown by its first ones and its length.
_SHOWN_DIGITS = 30
_SHORTENED_FROM = 10**_SHOWN_DIGITS


def shown(value: object) -> str:
    """``repr(value)`` for an error message, short for a long int.

    An int of more than `_SHOWN_DIGITS` digits is shown by its first
    digits and how many it has (Python refuses to print one of more than
    4300, and a message of thousands of digits tells nothing); a value
    whose repr fails (a Fraction of such ints, a user's object whose
    ``__repr__`` raises) by its type: the error it is quoted in is raised,
    not the repr's.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        number = int(value)
        size = abs(number)
        if size >= _SHORTENED_FROM:
            digits = int(size.bit_length() * math.log10(2))  # (one short, or exact)
            digits += size >= 10**digits
            first = size // 10 ** (digits - 12)
            sign = "-" if number < 0 else ""
            return f"{sign}{first}... (an int of {digits} digits)"
    try:
        return repr(value)
    except ValueError:  # (a Fraction of ints past Python's 4300 digits)
        return f"a {value.__class__.__qualname__} too long to print"
    except Exception:  # noqa: BLE001 - (a user's __repr__ that raises)
        return f"a {value.__class__.__qualname__} (whose repr raised)"


def said(exc: BaseException) -> str:
    """``str(exc)``, or a word that it could not be read (its ``__str__`` raised).

    For the messages that quote an exception of ``fn`` (or of a user's
    object): a ``__str__`` that raises must not replace the error it tells.
    """
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - (any error of a user's __str__)
        return f"(a {type(exc).__name__} whose message could not be read)"
