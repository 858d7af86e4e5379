"""``report.html``: one self-contained page per run, read from its run directory.

Owns the page (:mod:`.page`), what it measures beyond the checker (:mod:`.measures`),
its plots (:mod:`.plots`), stories (:mod:`.stories`) and template. It reads run
directories, never a live cluster; a run without a verdict is checked by
:func:`faultline.checkers.stored.check_stored`, the check ``faultline check`` runs.

May import: errors, faults, spec, history, rundir, checkers.
"""
