"""The ``faultline`` commands, one module per command (``faultline run`` is
:mod:`.run`, ``faultline check`` :mod:`.check`, ...), and the options several share
(:mod:`.options`). A command parses its arguments, calls the package that does the work
and says the outcome; what another command also needs lives in that package, not here.
:mod:`faultline.cli` registers them.

May import: every package.
"""
