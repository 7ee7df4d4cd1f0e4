"""tap.py: a minimal TAP producer for the recorder's tests (run by prove with the venv's python)."""
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

_n = 0
_failed = 0


def ok(cond, name):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print(f"{'ok' if cond else 'not ok'} {_n} - {name}")
    return cond


def eq(got, want, name):
    if not ok(got == want, name):
        print(f"#   got:  {got!r}\n#   want: {want!r}")


def raises(exc, fn, name, match=None):
    try:
        fn()
    except exc as e:
        ok(match is None or match in str(e), name)
        if match is not None and match not in str(e):
            print(f"#   message {str(e)!r} lacks {match!r}")
        return
    except Exception:  # noqa: BLE001
        traceback.print_exc(file=sys.stdout)
    ok(False, name)


def skip_all(reason):
    print(f"1..0 # SKIP {reason}")
    sys.exit(0)


def done():
    print(f"1..{_n}")
    sys.exit(1 if _failed else 0)
