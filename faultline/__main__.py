"""``python -m faultline``: the ``faultline`` command (:mod:`faultline.cli`)."""

from faultline.cli import main

if __name__ == "__main__":
    main()
