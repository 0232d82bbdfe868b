"""The `solbench` command (``python -m solbench`` and the installed script): Ctrl-C while the command
line loads (torch takes seconds) is the same one line and exit 130 as during a command."""

import sys


def main() -> None:
    from solbench.errors import INTERRUPTED

    try:
        from solbench.cli import main as cli_main
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
