"""Maps the top-level folders onto the `martlet.*` namespace (see pyproject.toml)."""

from setuptools import find_packages, setup

FOLDERS = ("cli", "broker", "gateway", "protocol", "engine", "compat", "connectors", "records", "tools", "client")

packages = []
package_dir = {}
for folder in FOLDERS:
    packages.append(f"martlet.{folder}")
    package_dir[f"martlet.{folder}"] = folder
    packages += [f"martlet.{folder}.{sub}" for sub in find_packages(where=folder)]

# The web console's static files (gateway/console/, served by gateway/http/static.py) are no package.
package_data = {"martlet.compat": ["reference/*.xml"], "martlet.gateway": ["console/*", "console/**/*"]}
setup(packages=packages, package_dir=package_dir, package_data=package_data)
