"""Tiny wheels made on the spot, for the installer's tests: pip installs or downloads them from a
local folder (PIP_NO_INDEX=1, PIP_FIND_LINKS=folder), so those tests need no network."""
import base64
import hashlib
import zipfile


def make_wheel(folder, name, version, files, compression=zipfile.ZIP_STORED):
    """Write folder/<name>-<version>-py3-none-any.whl holding files ({path: str or bytes}) plus
    the METADATA, WHEEL and RECORD pip requires (members stored, or compressed with
    `compression`); returns its path."""
    mod = name.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    files = {p: (c.encode() if isinstance(c, str) else c) for p, c in files.items()}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: zinc-tests\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for p, data in files.items():
            z.writestr(p, data)
    return path


def offline_pip_env(env, folder):
    """env with pip confined to folder: no index, no network."""
    env = dict(env)
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(folder), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env
