"""The repository is Apache-2.0 (LICENSE, the full text) with a NOTICE, and the Lambda asset
that carries botocore's data carries botocore's LICENSE and NOTICE with it (Apache-2.0 §4)."""

from __future__ import annotations

import hashlib
from importlib.metadata import distribution

from saga_build.trim_models import MODELS_DIR
from sagactl.paths import PROJECT_ROOT
from stacks.function_code import LAMBDAS_DIR, asset_files

# SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the full text with its appendix.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_is_the_full_apache_2_0_text() -> None:
    text = (PROJECT_ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256


def test_the_notice_names_the_botocore_data_and_amazons_copyright() -> None:
    notice = (PROJECT_ROOT / "NOTICE").read_text(encoding="utf-8")
    botocore_notice = distribution("botocore").read_text("NOTICE") or ""
    copyright_line = botocore_notice.splitlines()[1]
    assert copyright_line.startswith("Copyright ") and "Amazon.com, Inc." in copyright_line
    assert copyright_line in notice.splitlines()
    assert "lambdas/saga/botocore_models/" in notice
    assert "Apache License, Version 2.0" in notice


def test_the_function_asset_carries_botocores_license_and_notice() -> None:
    shipped = {path.relative_to(LAMBDAS_DIR).as_posix() for path in asset_files(LAMBDAS_DIR)}
    assert {"saga/botocore_models/LICENSE", "saga/botocore_models/NOTICE"} <= shipped
    license_text = (MODELS_DIR / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert (
        (MODELS_DIR / "NOTICE")
        .read_text(encoding="utf-8")
        .endswith(distribution("botocore").read_text("NOTICE") or "missing")
    )
