"""The driver's file access: Spark's Hadoop ``FileSystem``, through the JVM, for any Hadoop path.

The driver never imports TensorFlow to touch files (executors and nodes use ``tf.io.gfile``):
it qualifies paths as Spark does (the default file system for a path without a scheme), tells
whether they exist, reads and writes small text files, and copies files, all through the
SparkContext's JVM (``hdfs://``, ``s3a://``, ``file:`` alike). ``for_tensorflow`` names a
qualified path as TensorFlow's file systems expect it (local files without ``file:``), and
``from_tensorflow`` goes back (a path without a scheme is a local file, whatever ``fs.defaultFS``).
"""

from __future__ import annotations

import os


def hadoop_path(sc, path: str):
    """``(FileSystem, qualified Path)`` of ``path`` in ``sc``'s Hadoop configuration."""
    jvm = sc._jvm
    raw = jvm.org.apache.hadoop.fs.Path(path)
    fs = raw.getFileSystem(sc._jsc.hadoopConfiguration())
    return fs, fs.makeQualified(raw)


def for_tensorflow(qualified) -> str:
    """A qualified Hadoop path as TensorFlow's file systems name it (local files without ``file:``)."""
    uri = qualified.toUri()
    return uri.getPath() if uri.getScheme() in (None, "file") else qualified.toString()


def from_tensorflow(path: str) -> str:
    """A path as TensorFlow names it, as a Hadoop path: one without a scheme is a local file."""
    return path if "://" in path or path.startswith("file:") else f"file://{os.path.abspath(path)}"


def tensorflow_path(sc, path: str) -> str:
    """``path`` qualified as Spark would, named as TensorFlow reads it on every node."""
    return for_tensorflow(hadoop_path(sc, path)[1])


def exists(sc, path: str) -> bool:
    """Whether ``path`` exists."""
    fs, qualified = hadoop_path(sc, path)
    return bool(fs.exists(qualified))


def mkdirs(sc, path: str) -> None:
    """Create the directory ``path`` and its parents (nothing if it exists)."""
    fs, qualified = hadoop_path(sc, path)
    fs.mkdirs(qualified)


def read_text(sc, path: str) -> str | None:
    """The UTF-8 text of the file at ``path``; None if there is none."""
    fs, qualified = hadoop_path(sc, path)
    if not fs.exists(qualified):
        return None
    stream = fs.open(qualified)
    try:
        return bytes(sc._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode("utf-8")
    finally:
        stream.close()


def write_text(sc, path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, replacing it: written beside it, then renamed into place."""
    fs, qualified = hadoop_path(sc, path)
    partial = sc._jvm.org.apache.hadoop.fs.Path(qualified.getParent(), f".{qualified.getName()}.{os.getpid()}.part")
    stream = fs.create(partial, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    fs.delete(qualified, False)
    if not fs.rename(partial, qualified):
        raise OSError(f"cannot rename {partial.toString()} to {qualified.toString()}")


def copy_to_local(sc, path: str, local_path: str) -> None:
    """Copy the file at ``path`` to ``local_path`` on the driver."""
    fs, qualified = hadoop_path(sc, path)
    local = sc._jvm.org.apache.hadoop.fs.Path(f"file://{os.path.abspath(local_path)}")
    fs.copyToLocalFile(False, qualified, local, True)  # True: the raw local file system, no .crc file


def copy(sc, source: str, target: str) -> None:
    """Copy the file at ``source`` to ``target`` (both any Hadoop path), creating its directory."""
    source_fs, source_path = hadoop_path(sc, source)
    target_fs, target_path = hadoop_path(sc, target)
    target_fs.mkdirs(target_path.getParent())
    copied = sc._jvm.org.apache.hadoop.fs.FileUtil.copy(
        source_fs, source_path, target_fs, target_path, False, True, sc._jsc.hadoopConfiguration()
    )
    if not copied:
        raise OSError(f"cannot copy {source_path.toString()} to {target_path.toString()}")
