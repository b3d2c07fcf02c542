"""torch_musa._import_hooks.after_import: a hook runs once its module executes, also when the
module was only looked up (importlib.util.find_spec, as a version gate probes) before it loads."""
import importlib.util
import sys

from torch_musa._import_hooks import after_import


def test_hook_survives_a_find_spec_probe_before_the_import(tmp_path, monkeypatch):
    name = "musa_import_hook_probe"
    (tmp_path / f"{name}.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    seen = []
    after_import(name, lambda m: seen.append(m.VALUE))
    assert importlib.util.find_spec(name) is not None and seen == []  # a probe loads nothing
    module = __import__(name)
    assert seen == [7] and module.VALUE == 7
    after_import(name, lambda m: seen.append(-m.VALUE))  # loaded already: runs at once
    assert seen == [7, -7]
    monkeypatch.delitem(sys.modules, name)
