"""The compiled functions' cache: one per version of the package's sources."""

from __future__ import annotations

from pathlib import Path

import numba

from faultline import compiled


def test_any_source_edit_moves_the_cache_and_the_old_ones_are_removed(tmp_path: Path) -> None:
    """An edit of a callee's module alone (numba checks a cached function against its own
    file only) gives a new cache; a file renamed gives one too; other files do not count."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "kernel.py").write_text("def feed(): return callee()\n")
    (package / "sub" / "callee.py").write_text("def callee(): return 1\n")
    first = compiled.cache_dir(package)
    assert first.parent == package / "__pycache__" and compiled.cache_dir(package) == first
    (package / "notes.txt").write_text("not a source")
    assert compiled.cache_dir(package) == first
    (package / "sub" / "callee.py").write_text("def callee(): return 2\n")
    second = compiled.cache_dir(package)
    assert second != first
    (package / "sub" / "callee.py").rename(package / "callee.py")
    assert compiled.cache_dir(package) not in (first, second)

    first.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (package / "__pycache__" / "numba-link").symlink_to(outside)
    compiled._use_cache(second)
    assert not first.exists() and outside.exists(), "the old cache removed, nothing through a link"
    assert str(second) == numba.config.CACHE_DIR
    compiled._use_cache(compiled.cache_dir(Path(compiled.__file__).parent))  # the package's own again


def test_the_package_caches_in_its_own_versioned_directory() -> None:
    assert str(compiled.cache_dir(Path(compiled.__file__).parent)) == numba.config.CACHE_DIR
