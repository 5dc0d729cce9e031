"""Distribution `tb-diagnostics`: a TensorBoard tab that explains PyTorch profiler traces."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent

setup(
    name="tb-diagnostics",
    version="0.1.0",
    description="Step-by-step diagnoses of PyTorch profiler traces, as a TensorBoard tab and a CLI",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    package_dir={"": "plugin"},
    packages=find_packages("plugin"),
    package_data={"tb_diagnostics": ["static/*", "static/**/*", "data/*.json"]},
    include_package_data=True,
    install_requires=[
        "numpy>=1.24",
        "msgspec>=0.18",
        "fsspec>=2023.1",
        "tensorboard>=2.14",
        "werkzeug>=2.2",
    ],
    extras_require={
        # torch and torch-tb-profiler are only needed to *make* traces (workloads/)
        # and to compare against the peer; the engine and the tab never import them.
        "workloads": ["torch>=2.1,<3"],
        "peer": ["torch-tb-profiler>=0.4"],
        # s3:// log dirs (gs://, az://, hdfs:// need gcsfs, adlfs, pyarrow likewise).
        "s3": ["s3fs>=2023.1"],
        # --executor dask://HOST:PORT: analyse a log dir on a Dask cluster.
        "dask": ["dask[distributed]>=2023.1"],
        # Report.steps_frame() / findings_frame() of the Python API.
        "pandas": ["pandas>=1.5"],
        "test": [
            "pytest>=7.4",
            "ruff>=0.5",
            "torch>=2.1,<3",
            "hypothesis>=6.80",
            "playwright>=1.65,<1.66",
            "atheris>=2.3",
            "moto[server]>=5.0",  # a real S3 API on loopback for the s3:// tests
            "s3fs>=2023.1",
            "boto3>=1.28",
            "dask[distributed]>=2023.1",  # the Dask executor's tests (a LocalCluster)
            "pandas>=1.5",  # the Python API's DataFrames (tests/test_api.py)
        ],
    },
    entry_points={
        "console_scripts": ["tb-diagnostics = tb_diagnostics.cli:main"],
        "tensorboard_plugins": ["diagnostics = tb_diagnostics.tb_plugin:DiagnosticsPlugin"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Framework :: TensorBoard",
    ],
)
