# JupyterHub of hpc.slurm_k8s (roles/portal): each user's notebook server is a Slurm job (batchspawner's
# SlurmSpawner) submitted as that user, on a slurmd node, with their /home. The settings come from the JSON
# the role renders (PORTAL_SETTINGS); secrets from files of the portal Secret; nothing here is site-specific.
# get_config is given by JupyterHub when it runs this file:
# pylint: disable=undefined-variable
import asyncio
import json
import os
import subprocess
import sys

import bcrypt
from batchspawner import SlurmSpawner
from jupyterhub.auth import Authenticator
from traitlets import Dict

# portal_options.py is mounted next to this file (traitlets runs this file with __file__ set, not its directory on the path)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # noqa: F821
import portal_options  # noqa: E402  pylint: disable=wrong-import-position

SETTINGS = json.load(open(os.environ.get("PORTAL_SETTINGS", "/etc/slurm-k8s/portal/portal.json")))
SECRETS = os.environ.get("PORTAL_SECRETS", "/etc/slurm-k8s/portal-secrets")


def secret(name):
    with open(os.path.join(SECRETS, name)) as handle:
        return handle.read().strip()


class LocalPasswordAuthenticator(Authenticator):
    """Per-user passwords: bcrypt hashes from the portal Secret (portal_users). No shared user, no default
    password: a user without a hash cannot log in."""

    password_hashes = Dict(help="user name -> bcrypt hash").tag(config=True)

    # checked against when the user has no hash, so that a refusal takes as long for a name that exists
    _NO_USER = bcrypt.hashpw(b"no such user", bcrypt.gensalt())

    async def authenticate(self, handler, data):
        name, password = data.get("username", ""), data.get("password", "")
        stored = self.password_hashes.get(name)
        # bcrypt takes a fraction of a second by design: off the hub's event loop
        matches = await asyncio.get_running_loop().run_in_executor(
            None, bcrypt.checkpw, password.encode(), stored.encode() if stored else self._NO_USER)
        return name if stored and password and matches else None


class PodSlurmSpawner(SlurmSpawner):
    """SlurmSpawner whose notebook is reached at its node's address: squeue gives the node's name, which only
    Slurm resolves; a slurmd pod registers with its pod IP as NodeAddr."""

    def options_from_form(self, formdata):
        # checked at once: a refusal shows the form again with its message (naming the field)
        return portal_options.chosen(SETTINGS["job_options"], {k: v for k, v in formdata.items() if k != "_xsrf"})

    async def submit_batch_script(self):
        # user_options come from the form, or as they are from the REST API: checked again here, before any of
        # it reaches the batch script (a refusal ends the start with its message)
        self.user_options = portal_options.chosen(SETTINGS["job_options"], self.user_options or {})
        return await super().submit_batch_script()

    def get_req_subvars(self):
        # the job's partition, CPUs, memory and time, from the checked options (or their defaults)
        subvars = super().get_req_subvars()
        subvars.update(portal_options.job_options(SETTINGS["job_options"], self.user_options or {}))
        return subvars

    def state_gethost(self):
        node = super().state_gethost()
        out = subprocess.run(["scontrol", "show", "node", node, "--oneliner"], capture_output=True, text=True,
                             check=True, timeout=30).stdout
        for field in out.split():
            if field.startswith("NodeAddr="):
                return field.split("=", 1)[1]
        raise RuntimeError("scontrol show node %s gave no NodeAddr" % node)


c = get_config()  # noqa: F821

c.JupyterHub.bind_url = SETTINGS["bind_url"]
c.JupyterHub.hub_bind_url = "http://0.0.0.0:8081"
# the proxy, in this pod, reaches the hub here (the NetworkPolicy admits only the notebooks to the Service's 8081);
# the notebooks, on the slurmd pods, through the Service
c.JupyterHub.hub_connect_url = "http://127.0.0.1:8081"
c.JupyterHub.db_url = "sqlite:////var/lib/jupyterhub/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = os.path.join(SECRETS, "cookie-secret")
c.ConfigurableHTTPProxy.auth_token = secret("proxy-token")
# servers are Slurm jobs: a hub restart keeps them (the routes come back from the database)
c.JupyterHub.cleanup_servers = False
c.JupyterHub.cleanup_proxy = False
if SETTINGS.get("tls_dir"):
    c.JupyterHub.ssl_cert = os.path.join(SETTINGS["tls_dir"], "tls.crt")
    c.JupyterHub.ssl_key = os.path.join(SETTINGS["tls_dir"], "tls.key")

if SETTINGS["auth"] == "oidc":
    from oauthenticator.generic import GenericOAuthenticator
    oidc = SETTINGS["oidc"]
    c.JupyterHub.authenticator_class = GenericOAuthenticator
    c.GenericOAuthenticator.client_id = oidc["client_id"]
    c.GenericOAuthenticator.client_secret = secret("oidc-client-secret")
    c.GenericOAuthenticator.oauth_callback_url = oidc["callback_url"]
    c.GenericOAuthenticator.authorize_url = oidc["authorize_url"]
    c.GenericOAuthenticator.token_url = oidc["token_url"]
    c.GenericOAuthenticator.userdata_url = oidc["userdata_url"]
    c.GenericOAuthenticator.username_claim = oidc["username_claim"]
    c.GenericOAuthenticator.scope = oidc["scope"]
    c.GenericOAuthenticator.allowed_users = set(SETTINGS["users"])
else:
    c.JupyterHub.authenticator_class = LocalPasswordAuthenticator
    c.LocalPasswordAuthenticator.password_hashes = json.loads(secret("password-hashes"))
    c.LocalPasswordAuthenticator.allowed_users = set(SETTINGS["users"])
c.Authenticator.admin_users = set()

c.JupyterHub.spawner_class = PodSlurmSpawner
c.PodSlurmSpawner.hub_connect_url = SETTINGS["hub_connect_url"]
c.PodSlurmSpawner.exec_prefix = "runuser -u {username} --"
c.PodSlurmSpawner.options_form = portal_options.form_html(SETTINGS["job_options"])
c.PodSlurmSpawner.start_timeout = SETTINGS["start_timeout"]
c.PodSlurmSpawner.http_timeout = SETTINGS["start_timeout"]
c.PodSlurmSpawner.default_url = "/lab"
c.PodSlurmSpawner.cmd = ["jupyterhub-singleuser"]
# batchspawner's own script asks for --get-user-env=L, which Slurm 26.05's sbatch refuses (the option takes no
# argument any more). The job gets the hub's variables (keepvars) and the user's HOME and USER; an --export
# without ALL also makes slurmd load the user's login environment (by fork in the image's slurmd: see
# images/slurm/slurmd-ns-fallback.c), and the step gets all of them.
c.PodSlurmSpawner.batch_script = """#!/bin/bash
#SBATCH --output={{homedir}}/.jupyterhub-slurm-%j.log
#SBATCH --job-name=jupyterhub-notebook
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}},HOME={{homedir}},USER={{username}}
{% if partition %}#SBATCH --partition={{partition}}
{% endif %}{% if runtime %}#SBATCH --time={{runtime}}
{% endif %}{% if memory %}#SBATCH --mem={{memory}}
{% endif %}{% if nprocs %}#SBATCH --cpus-per-task={{nprocs}}
{% endif %}
set -euo pipefail
export SLURM_EXPORT_ENV=ALL
trap 'echo SIGTERM received' TERM
{{srun}} {{cmd}}
echo "jupyterhub-singleuser ended gracefully"
"""
