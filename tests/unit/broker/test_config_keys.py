"""Every config key is documented, the printed defaults load back as the defaults, and
README.md shows exactly what `martlet config` prints."""

import tomllib
from pathlib import Path

from martlet.broker.config import ServeConfig, from_document
from martlet.broker.config_keys import defaults_toml, undocumented

README = Path(__file__).resolve().parents[3] / "README.md"


def test_every_settings_field_has_a_note() -> None:
    assert undocumented() == []


def test_the_printed_defaults_load_back_as_the_defaults() -> None:
    assert from_document(tomllib.loads(defaults_toml())) == ServeConfig()


def test_readme_shows_what_martlet_config_prints() -> None:
    assert f"```toml\n{defaults_toml()}```" in README.read_text()
