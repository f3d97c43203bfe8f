# Sourced by scripts/install.sh, run-tests.sh and quickstart.sh: sets PYTHON, the interpreter aka is
# installed into and run with, and puts its bin folder first on PATH (as activating it would).
#   1. $PYTHON, when set: used as it is (AKA_NO_VENV=1 is the same as PYTHON=python3);
#   2. else the active virtual environment ($VIRTUAL_ENV);
#   3. else .venv in this checkout, created on first use (with the python3 on PATH). Where this
#      Python cannot make one (Debian without python3-venv), it says so and uses python3.
# Two checkouts therefore never install into one site-packages by accident.
aka_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${PYTHON:-}" ]; then
  :
elif [ -n "${AKA_NO_VENV:-}" ]; then
  PYTHON=python3
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  PYTHON="$VIRTUAL_ENV/bin/python"
else
  if [ ! -x "$aka_root/.venv/bin/python" ]; then
    if python3 -m venv "$aka_root/.venv" >/dev/null 2>&1; then
      echo "aka: made a virtual environment in $aka_root/.venv (use it: source .venv/bin/activate;" \
           "AKA_NO_VENV=1 installs into python3 instead)" >&2
    else
      rm -rf "$aka_root/.venv"
      echo "aka: python3 cannot make a virtual environment here (Debian: apt install" \
           "python3-venv); installing into $(command -v python3) instead" >&2
    fi
  fi
  if [ -x "$aka_root/.venv/bin/python" ]; then
    PYTHON="$aka_root/.venv/bin/python"
    export VIRTUAL_ENV="$aka_root/.venv"
  else
    PYTHON=python3
  fi
fi
case "$PYTHON" in
  */*) PATH="$(cd "$(dirname "$PYTHON")" && pwd):$PATH" ;;
esac
export PYTHON PATH
