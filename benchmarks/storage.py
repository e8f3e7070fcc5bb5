"""sparkdl's file layer (``sparkdl.storage``) against the bare S3 clients, on moto's S3 server on 127.0.0.1.

(1) A Keras 3 model of ``--units`` x ``--units`` float32 weights (7000: 49M parameters, a 196 MB
``.keras`` file) saved locally and uploaded with ``Storage.upload``, against the same save and the
same bytes uploaded by the bare client the layer wraps (a default ``pyarrow.fs.S3FileSystem`` and
``pyarrow.fs.copy_files``: the reference) and by boto3's ``upload_file``; then downloaded
(``Storage.download``; bare ``copy_files``; boto3's ``download_file``) and loaded with
``keras.models.load_model``. The three alternate within each of ``--runs`` rounds; medians.

(2) The per-epoch cost of a Keras backup kept in the bucket: one process fits a small MLP and a
larger one (Adam, ``--rows`` random 784-float rows) with ``keras_backup.backup_and_restore`` on
``s3://<bucket>/backup`` (saved locally, then published as a generation), with Keras'
``BackupAndRestore`` on a local directory, and with no backup; seconds per epoch are the medians of
epochs 2..N (epoch 1 traces the graph), the three alternating within each round.

    .venv/bin/python benchmarks/storage.py [--runs 3] [--units 7000] [--epochs 6] [--json results.json]
    .venv/bin/python benchmarks/storage.py --quick      # a smoke run: tiny sizes, one round

The S3 server is ``tests/support/s3_server.py``'s (moto with IAM authentication) when that helper
is there, else a plain ``python -m moto.server`` started here. Both hold objects in their own
Python process on the same cores: the seconds are moto's as much as the clients', the ratios are not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WIDTH, CLASSES = 784, 10
VARIANTS = ("sparkdl Storage", "bare pyarrow", "boto3")
BACKUPS = ("no backup", "local BackupAndRestore", "bucket backup_and_restore")


# -- the S3 server --


class _PlainMoto:
    """``python -m moto.server`` on a free port of 127.0.0.1 (no authentication), one bucket."""

    def __init__(self, bucket: str):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self.stop()
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.05)
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench-secret",
        )
        self.client.create_bucket(Bucket=bucket)
        self.bucket = bucket

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)


def start_server(bucket: str):
    """``(server, which one)``: the tests' S3Server when present, else moto started here."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    try:
        from s3_server import S3Server

        return S3Server(bucket), "tests/support/s3_server.py (moto 5 with IAM authentication)"
    except ImportError:
        return _PlainMoto(bucket), "python -m moto.server, no authentication"
    finally:
        sys.path.pop(0)


def server_cpu(server) -> float:
    """CPU seconds the server process has used so far (user + system)."""
    import psutil

    times = psutil.Process(server._process.pid).cpu_times()
    return times.user + times.system


# -- (1) a large model up and down --


def big_model(units: int):
    """``units`` inputs, one Dense of ``units``: ``units * (units + 1)`` float32 parameters."""
    import keras

    return keras.Sequential([keras.Input((units,)), keras.layers.Dense(units)])


def save_and_upload(variant, model, local, key, clients, server) -> dict:
    """Save ``model`` to ``local`` then upload it to ``key`` in the bucket the ``variant``'s way."""
    import pyarrow.fs as pafs

    storage, s3, boto = clients
    if os.path.exists(local):
        os.remove(local)
    started = time.perf_counter()
    model.save(local)
    saved = time.perf_counter()
    cpu = server_cpu(server)
    if variant == "sparkdl Storage":
        storage.upload(local, f"s3://{server.bucket}/{key}")
    elif variant == "bare pyarrow":
        pafs.copy_files(
            local, f"{server.bucket}/{key}", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3
        )
    else:
        boto.upload_file(local, server.bucket, key)
    done = time.perf_counter()
    return {
        "save_s": saved - started,
        "upload_s": done - saved,
        "total_s": done - started,
        "server_cpu_s": server_cpu(server) - cpu,
        "bytes": os.path.getsize(local),
    }


def download_and_load(variant, local, key, clients, server) -> dict:
    """Download ``key`` to ``local`` the ``variant``'s way, then ``keras.models.load_model`` it."""
    import keras
    import pyarrow.fs as pafs

    storage, s3, boto = clients
    if os.path.exists(local):
        os.remove(local)
    cpu = server_cpu(server)
    started = time.perf_counter()
    if variant == "sparkdl Storage":
        storage.download(f"s3://{server.bucket}/{key}", local)
    elif variant == "bare pyarrow":
        pafs.copy_files(
            f"{server.bucket}/{key}", local, source_filesystem=s3, destination_filesystem=pafs.LocalFileSystem()
        )
    else:
        boto.download_file(server.bucket, key, local)
    fetched = time.perf_counter()
    server_s = server_cpu(server) - cpu
    keras.models.load_model(local)
    done = time.perf_counter()
    return {
        "download_s": fetched - started,
        "load_s": done - fetched,
        "total_s": done - started,
        "server_cpu_s": server_s,
        "bytes": os.path.getsize(local),
    }


def transfer_part(opts, server, clients, scratch: Path) -> dict:
    """(1): ``--runs`` rounds of each variant's save + upload, then download + load; the raw samples."""
    model = big_model(opts.units)
    samples = {variant: {"up": [], "down": []} for variant in VARIANTS}
    for run in range(opts.runs):
        order = VARIANTS[run % 3 :] + VARIANTS[: run % 3]
        for variant in order:
            key = f"models/{variant.split()[-1].lower()}/model.keras"
            up = save_and_upload(variant, model, str(scratch / "saved.keras"), key, clients, server)
            down = download_and_load(variant, str(scratch / "fetched.keras"), key, clients, server)
            assert down["bytes"] == up["bytes"], (variant, up["bytes"], down["bytes"])
            samples[variant]["up"].append(up)
            samples[variant]["down"].append(down)
            server.client.delete_object(Bucket=server.bucket, Key=key)
        print(
            f"run {run + 1}/{opts.runs}: "
            + ", ".join(
                f"{v} up {samples[v]['up'][-1]['total_s']:.2f} s down {samples[v]['down'][-1]['total_s']:.2f} s"
                for v in VARIANTS
            ),
            flush=True,
        )
    return samples


# -- (2) BackupAndRestore every epoch --

#: The store requests a publish makes, by the Storage method that makes them.
STEPS = {
    "read_bytes": "pointer read",
    "_put_file": "files uploaded",
    "write_bytes": "pointer written",
    "listdir": "generations listed",
    "delete": "older generation deleted",
}


def timed_storage():
    """A ``Storage`` that adds up the seconds of each step of its publishes (:data:`STEPS`)."""
    from sparkdl.storage import Storage

    class TimedStorage(Storage):
        def __init__(self):
            super().__init__()
            self.seconds = dict.fromkeys([*STEPS, "publish"], 0.0)
            self.publishes = 0
            for name in STEPS:  # a step the layer no longer has stays at 0
                if hasattr(self, name):
                    setattr(self, name, self._timed(name, getattr(self, name)))

        def _timed(self, name, method):
            def timed(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    self.seconds[name] += time.perf_counter() - started

            return timed

        def publish(self, local_dir, path, **facts):
            self.publishes += 1
            before = dict(self.seconds)
            started = time.perf_counter()
            try:
                return super().publish(local_dir, path, **facts)
            finally:
                self.seconds["publish"] += time.perf_counter() - started
                self.steps.append({k: self.seconds[k] - before[k] for k in self.seconds})

    storage = TimedStorage()
    storage.steps = []
    return storage


class EpochClock:
    """Keras callback: the time of each epoch's end, taken after every callback before it (the backup)."""

    def __new__(cls, backup_dir: str | None):
        import keras

        class _Clock(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.ends, self.backup_bytes = [], 0

            def on_epoch_end(self, epoch, logs=None):
                self.ends.append(time.perf_counter())
                if backup_dir and os.path.isdir(backup_dir):
                    self.backup_bytes = sum(p.stat().st_size for p in Path(backup_dir).rglob("*") if p.is_file())

        return _Clock()


def mlp(hidden: tuple[int, ...]):
    import keras

    layers = [keras.Input((WIDTH,))] + [keras.layers.Dense(n, activation="relu") for n in hidden]
    model = keras.Sequential([*layers, keras.layers.Dense(CLASSES, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def fit_once(variant, hidden, x, y, opts, remote, scratch: Path) -> dict:
    """One ``model.fit`` of ``--epochs`` with the ``variant``'s backup; its epoch times (and, for the
    bucket, each publish's steps)."""
    import keras

    from sparkdl.storage import keras_backup

    storage = timed_storage()
    storage.exists(remote)  # the client made before the fit, as on a node
    local_dir = scratch / "backup"
    shutil.rmtree(local_dir, ignore_errors=True)
    if variant == "bucket backup_and_restore":
        backup = [
            keras_backup.backup_and_restore(keras.callbacks.BackupAndRestore, storage, remote, True, str(local_dir))
        ]
    elif variant == "local BackupAndRestore":
        backup = [keras.callbacks.BackupAndRestore(str(local_dir))]
    else:
        backup = []
    model = mlp(hidden)
    clock = EpochClock(str(local_dir) if backup else None)
    started = time.perf_counter()
    model.fit(x, y, batch_size=opts.batch, epochs=opts.epochs, callbacks=[*backup, clock], verbose=0, shuffle=False)
    fit_s = time.perf_counter() - started
    epochs = [b - a for a, b in zip(clock.ends, clock.ends[1:])]  # epochs 2..N, each with its backup
    return {
        "fit_s": fit_s,
        "epoch_s": epochs,
        "median_epoch_s": statistics.median(epochs),
        "bytes": clock.backup_bytes,
        "publishes": storage.steps[1:],  # epoch 1's is left out, as its epoch is
    }


def backup_part(opts, server, scratch: Path) -> dict:
    """(2): ``--runs`` rounds of each model's fit with each backup; the raw samples."""
    import numpy as np

    x = np.random.default_rng(0).random((opts.rows, WIDTH), dtype=np.float32)
    y = x[:, :CLASSES].argmax(axis=1).astype("int64")
    models = {"small": tuple(opts.small), "large": tuple(opts.large)}
    samples = {name: {variant: [] for variant in BACKUPS} for name in models}
    for run in range(opts.runs):
        order = BACKUPS[run % 3 :] + BACKUPS[: run % 3]
        for name, hidden in models.items():
            for variant in order:
                remote = f"s3://{server.bucket}/backup/{name}"
                samples[name][variant].append(fit_once(variant, hidden, x, y, opts, remote, scratch))
            print(
                f"run {run + 1}/{opts.runs} {name}: "
                + ", ".join(f"{v} {samples[name][v][-1]['median_epoch_s'] * 1000:.0f} ms/epoch" for v in BACKUPS),
                flush=True,
            )
    return samples


# -- the report --


def median(samples: list[dict], field: str) -> float:
    return statistics.median(sample[field] for sample in samples)


def report(opts, transfer: dict, backups: dict, server_kind: str) -> None:
    from results_json import finish

    up = {v: transfer[v]["up"] for v in VARIANTS}
    down = {v: transfer[v]["down"] for v in VARIANTS}
    megabytes = up["sparkdl Storage"][0]["bytes"] / 1e6
    table = [(".keras file", megabytes, "MB")]
    for variant in VARIANTS:
        table += [
            (f"(1) save + upload, {variant}", median(up[variant], "total_s"), "s"),
            (f"(1)   upload alone, {variant}", median(up[variant], "upload_s"), "s"),
            (f"(1)   S3 server CPU during the upload, {variant}", median(up[variant], "server_cpu_s"), "s"),
        ]
    table.append(
        ("(1)   keras save alone (all variants)", statistics.median(s["save_s"] for v in up.values() for s in v), "s")
    )
    for variant in VARIANTS:
        table += [
            (f"(1) download + load, {variant}", median(down[variant], "total_s"), "s"),
            (f"(1)   download alone, {variant}", median(down[variant], "download_s"), "s"),
        ]
    table.append(
        ("(1)   keras load alone (all variants)", statistics.median(s["load_s"] for v in down.values() for s in v), "s")
    )
    layer, bare, boto = (up[v] for v in VARIANTS)
    layer_d, bare_d, boto_d = (down[v] for v in VARIANTS)
    ratios = {
        "(1) save + upload: bare pyarrow / sparkdl Storage, time (goal >= 0.9)": median(bare, "total_s")
        / median(layer, "total_s"),
        "(1) upload alone: bare pyarrow / sparkdl Storage, time": median(bare, "upload_s") / median(layer, "upload_s"),
        "(1) save + upload: boto3 / sparkdl Storage, time": median(boto, "total_s") / median(layer, "total_s"),
        "(1) download + load: bare pyarrow / sparkdl Storage, time (goal >= 0.9)": median(bare_d, "total_s")
        / median(layer_d, "total_s"),
        "(1) download alone: bare pyarrow / sparkdl Storage, time": median(bare_d, "download_s")
        / median(layer_d, "download_s"),
        "(1) download + load: boto3 / sparkdl Storage, time": median(boto_d, "total_s") / median(layer_d, "total_s"),
    }
    for name, by_variant in backups.items():
        hidden = "-".join(str(n) for n in (WIDTH, *getattr(opts, name), CLASSES))
        size = by_variant["bucket backup_and_restore"][0]["bytes"] / 1e6
        table.append((f"(2) {name} MLP {hidden}, Adam: backup per epoch", size, "MB"))
        epoch = {v: median(by_variant[v], "median_epoch_s") * 1000 for v in BACKUPS}
        for variant in BACKUPS:
            table.append((f"(2) {name}: epoch, {variant}", epoch[variant], "ms"))
        extra = {v: [s["median_epoch_s"] * 1000 for s in by_variant[v]] for v in BACKUPS}
        bucket_over_local = statistics.median(
            b - a for b, a in zip(extra["bucket backup_and_restore"], extra["local BackupAndRestore"])
        )
        table += [
            (f"(2) {name}: bucket's extra per epoch over local", bucket_over_local, "ms"),
            (
                f"(2) {name}: local backup's extra per epoch over none",
                epoch["local BackupAndRestore"] - epoch["no backup"],
                "ms",
            ),
        ]
        publishes = [p for s in by_variant["bucket backup_and_restore"] for p in s["publishes"]]
        table.append(
            (f"(2) {name}: publish, per epoch", statistics.median(p["publish"] for p in publishes) * 1000, "ms")
        )
        for step, what in STEPS.items():
            table.append((f"(2) {name}:   of which {what}", statistics.median(p[step] for p in publishes) * 1000, "ms"))
        ratios[f"(2) {name}: epoch with local backup / with bucket backup, time"] = (
            epoch["local BackupAndRestore"] / epoch["bucket backup_and_restore"]
        )
    notes = [
        f"S3 server: {server_kind}, on 127.0.0.1 and the same cores; moto keeps objects in its Python process",
        "bare pyarrow: a default pyarrow.fs.S3FileSystem (endpoint, keys, region) and pyarrow.fs.copy_files, "
        "the client the layer wraps; boto3: S3 client upload_file/download_file (default transfer config)",
        "(2): epoch times are the medians of epochs 2..N of each fit, each with its backup; the bucket's extra is "
        "the median over rounds of bucket minus local in the same round",
    ]
    finish(
        opts,
        "sparkdl.storage against bare S3 clients (moto on 127.0.0.1)",
        table,
        ratios,
        notes,
        raw={"transfer": transfer, "backup": backups},
        digits=lambda unit: 2 if unit == "s" else 1,
        master="none: one process, moto's S3 server on 127.0.0.1",
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds; the variants alternate within each")
    parser.add_argument("--units", type=int, default=7000, help="(1) the Dense model's width: units^2 float32")
    parser.add_argument("--rows", type=int, default=4096, help="(2) rows per epoch")
    parser.add_argument("--epochs", type=int, default=6, help="(2) epochs per fit (epoch 1 is not timed)")
    parser.add_argument("--batch", type=int, default=128, help="(2) rows per step")
    parser.add_argument("--small", type=int, nargs="+", default=[512, 256], help="(2) hidden widths, small MLP")
    parser.add_argument("--large", type=int, nargs="+", default=[2048, 1280], help="(2) hidden widths, large MLP")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, one round")
    parser.add_argument("--json", help="write the results as JSON to this path")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.runs, opts.units, opts.rows, opts.epochs, opts.small, opts.large = 1, 500, 512, 3, [64], [256]

    sys.path.insert(0, str(HERE))
    server, server_kind = start_server("sparkdl-bench")
    scratch = Path(tempfile.mkdtemp(prefix="sparkdl-storage-bench-"))
    try:
        os.environ.update(server.env)
        import boto3
        import pyarrow.fs as pafs

        from sparkdl.storage import Storage

        storage = Storage()
        host = server.endpoint.split("://", 1)[1]
        s3 = pafs.S3FileSystem(
            endpoint_override=host,
            scheme="http",
            access_key=server.env["AWS_ACCESS_KEY_ID"],
            secret_key=server.env["AWS_SECRET_ACCESS_KEY"],
            region="us-east-1",
        )
        boto = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
        storage.exists(f"s3://{server.bucket}/none"), s3.get_file_info(f"{server.bucket}/none")  # clients made
        boto.list_objects_v2(Bucket=server.bucket, MaxKeys=1)
        transfer = transfer_part(opts, server, (storage, s3, boto), scratch)
        backups = backup_part(opts, server, scratch)
        report(opts, transfer, backups, server_kind)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
