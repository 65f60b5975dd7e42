"""The installed versions of the packages an env's episodes depend on, recorded with every run of it.

An env class names those packages in its class attribute `packages` (ALFWorld: `alfworld` and `textworld`,
whose game engine and grammar make its text and admissible commands); envs written here name none. Every
trajectory store a rollout or search writes records them (`meta.rollout.env_versions`), and so does a
pipeline run's `manifest.json` (`environment.packages`), so a number can be traced to the package versions
that made it.
"""

from __future__ import annotations

import importlib.metadata

from proctor.envs.registry import entries


def package_version(name: str) -> str | None:
    """The installed version of distribution `name` (None: not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def env_packages(env: str) -> tuple[str, ...]:
    """The packages registered env `env` depends on (its class's `packages`; () for an unknown env or one that
    names none). Loads the env's module, not its packages."""
    entry = entries().get(env)
    if entry is None:
        return ()
    try:
        factory = entry.factory()
    except ImportError:  # the extra is not installed: nothing of it to record
        return ()
    return tuple(getattr(factory, "packages", ()))


def env_versions(env: str) -> dict[str, str | None]:
    """{package: installed version or None} for `env_packages(env)`."""
    return {name: package_version(name) for name in env_packages(env)}
