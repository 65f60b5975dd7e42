"""The earlier home of the PRM fields of PRM-guided configs, now `proctor.prm.ref` (`PRMRef`, `PRMRef.open`); the
old names still import, each with a DeprecationWarning naming the new one."""

from proctor.renames import moved_names

__getattr__ = moved_names(__name__, {"PRMScoring": "proctor.prm.ref:PRMRef",
                                     "check_prm_folder": "proctor.prm.ref:check_prm_folder",
                                     "load_scorer": "proctor.prm.ref:open_scorer"})
