"""Tier T3: the web portal (cluster_portal_enabled) in a real browser on a real Kubernetes.

One cluster (namespace slurm-portal, 2 workers of 2 CPUs running the notebook image) with the portal on:
JupyterHub in its pod, NodePort 30057. Debian's Chromium, headless, driven by Selenium, logs in as alice (her
password's bcrypt hash is a variable), asks for a notebook job through the options form, opens a notebook of her home in it and
runs its cell from the Run menu, stops it. What the browser shows is checked against Slurm (squeue, scontrol, sacct in the slurmctld pod) and
the shared /home (read over SSH on the login pod). A screenshot of every step is written to
tests/output/portal-screenshots (its path is printed at the end).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

from tests.k8s.cluster import SlurmOnKube
from tests.support.proc import ROOT, collection_version, wait_for

NAME = "portal"
SSH_PORT = 30056
WEB_PORT = 30057
URL = "http://127.0.0.1:%d" % WEB_PORT
PASSWORD = "correct horse battery staple"
# the bounds of the options form: within a worker of 2 CPUs and 921 MB (RealMemory of 1024 MiB at 90 %)
JOB_OPTIONS = {"partitions": [], "cpus": {"default": 1, "max": 2}, "memory_mb": {"default": 256, "max": 512},
               "time_minutes": {"default": 30, "max": 120}}
NOTEBOOK = "from-the-portal.ipynb"
# JupyterLab 4's Run menu item "Run All Cells", once enabled (the notebook is the current document)
RUN_ALL_CELLS = ".lm-Menu-item[data-command='runmenu:run-all']:not(.lm-mod-disabled)"
CELL = ("import os; open(os.path.expanduser('~/from-the-portal.txt'), 'w').write(os.environ['SLURM_JOB_ID']); "
        "print('uid', os.getuid(), 'job', os.environ['SLURM_JOB_ID'])")


def bcrypt_hash(image, password):
    """The bcrypt hash of a password, made by the portal image's python3-bcrypt: the variable's value."""
    return subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3", image, "-c",
                           "import bcrypt, sys; print(bcrypt.hashpw(sys.stdin.read().encode(), bcrypt.gensalt()).decode())"],
                          input=password, capture_output=True, text=True, check=True, timeout=120).stdout.strip()


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    tag = "%s-portal" % collection_version()
    workdir = tmp_path_factory.mktemp("portal")
    deployment = SlurmOnKube(kube, workdir, NAME, tag, SSH_PORT)
    # kept after the run (tests/output is the test output CI keeps; `make clean` removes it)
    deployment.screenshots = ROOT / "tests" / "output" / "portal-screenshots"
    shutil.rmtree(deployment.screenshots, ignore_errors=True)
    deployment.screenshots.mkdir(parents=True)
    started = time.monotonic()
    kube.build_and_load_images(tag, portal=True)
    deployment.timings["images_s"] = time.monotonic() - started
    deployment.save(
        cluster_portal_enabled=True, slurmd_image="hpc-slurm-k8s/slurm-notebook:%s" % tag,
        portal_service_type="NodePort", portal_node_port=WEB_PORT,
        portal_users=[{"name": "alice", "password_hash": bcrypt_hash("hpc-slurm-k8s/slurm-portal:%s" % tag, PASSWORD)}],
        portal_job_options=JOB_OPTIONS, portal_start_timeout=120,
        portal_resources={"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
        config_users=deployment.variables["config_users"] + [{"name": "bob", "uid": 2002}])
    kube.delete_namespace(deployment.namespace)
    proc, changed, seconds = deployment.site()
    deployment.timings["site_first_run_s"] = seconds
    assert changed > 0 and "portal: Service 'portal' (NodePort), port 8000, HTTP" in proc.stdout, proc.stdout[-3000:]
    yield deployment
    print("\nportal timings: %s; screenshots in %s" % (json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}),
                                                       deployment.screenshots))
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def chrome(screenshots):
    """Debian's Chromium, headless, driven by Selenium (also benchmarks/portal_start.py); driver.shot(name) saves
    the next numbered screenshot into the directory `screenshots`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(argument)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.shots = 0

    def shot(name):
        driver.shots += 1
        driver.save_screenshot(str(screenshots / ("%02d-%s.png" % (driver.shots, name))))
    driver.shot = shot
    return driver


@pytest.fixture(scope="module")
def browser(cluster):
    driver = chrome(cluster.screenshots)
    yield driver
    driver.quit()


def wait(driver, condition, timeout, what):
    """Until `condition(driver)` is true; a page that is being replaced (a stale element) is asked again."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        driver.shot("timeout")
        raise AssertionError("%s within %d s (at %s)" % (what, timeout, driver.current_url)) from None


def page_text(driver):
    return driver.execute_script("return document.body ? document.body.innerText : ''")


def log_in(driver, user, password):
    from selenium.webdriver.common.by import By
    driver.delete_all_cookies()
    driver.get(URL + "/hub/login")
    wait(driver, lambda d: d.find_elements(By.ID, "username_input"), 60, "the login form")
    driver.find_element(By.ID, "username_input").send_keys(user)
    driver.find_element(By.ID, "password_input").send_keys(password)
    driver.find_element(By.ID, "login_submit").click()


def hub_answers():
    """The hub answers its health check through the NodePort: the proxy listens and the hub behind it is up (a
    pod is Ready when the proxy listens, and kube-proxy routes the node port to it a moment later)."""
    try:
        with urllib.request.urlopen(URL + "/hub/health", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def notebook_jobs(cluster, user="alice"):
    """Job id -> state of the user's notebook jobs in the queue."""
    out = cluster.ctld("squeue", "-h", "-u", user, "-n", "jupyterhub-notebook", "-o", "%i|%T").stdout
    return dict(line.split("|") for line in out.split())


def test_the_portal_runs_in_its_pod_and_a_second_run_changes_nothing(cluster):
    pods = cluster.kube.pods(cluster.namespace, "app.kubernetes.io/name=portal")
    assert len(pods) == 1 and all(cluster.kube.is_ready(pod) for pod in pods.values()), pods.keys()
    _proc, changed, _seconds = cluster.site()
    assert changed == 0


def test_a_wrong_password_and_a_user_without_a_password_are_refused(cluster, browser):
    from selenium.webdriver.common.by import By
    for user, password in (("alice", PASSWORD + "!"), ("bob", PASSWORD), ("mallory", PASSWORD)):
        log_in(browser, user, password)
        wait(browser, lambda d: "Invalid username or password" in page_text(d), 30,
             "the refusal of %s" % user)
        browser.shot("refused-%s" % user)
        assert "/hub/login" in browser.current_url
    assert notebook_jobs(cluster) == {}


def test_a_value_above_its_bound_sent_past_the_form_is_refused_by_the_hub(cluster, browser):
    """The browser's own limits are removed and 64 CPUs sent: the hub refuses the start naming the field, and
    no job is submitted."""
    from selenium.webdriver.common.by import By
    log_in(browser, "alice", PASSWORD)
    wait(browser, lambda d: d.find_elements(By.ID, "cpus"), 60, "the options form")
    browser.shot("form")
    browser.execute_script("const f = document.getElementById('cpus'); f.removeAttribute('max'); f.value = '64';")
    browser.find_element(By.CSS_SELECTOR, "form input[type=submit], form button[type=submit]").click()
    wait(browser, lambda d: "cpus: 64 CPUs is outside 1 to 2, the portal's bound" in page_text(d),
         60, "the hub's refusal")
    browser.shot("refused-64-cpus")
    assert notebook_jobs(cluster) == {}


def test_alice_starts_a_notebook_that_is_her_slurm_job_with_the_options_she_chose(cluster, browser):
    from selenium.webdriver.common.by import By
    log_in(browser, "alice", PASSWORD)
    wait(browser, lambda d: d.find_elements(By.ID, "cpus"), 60, "the options form")
    for field, value in (("cpus", "2"), ("memory_mb", "512"), ("time_minutes", "45")):
        element = browser.find_element(By.ID, field)
        element.clear()
        element.send_keys(value)
    started = time.monotonic()
    browser.find_element(By.CSS_SELECTOR, "form input[type=submit], form button[type=submit]").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-LauncherCard"), 180, "JupyterLab's launcher")
    cluster.timings["start_to_lab_s"] = time.monotonic() - started
    browser.shot("lab")
    (job, state), = notebook_jobs(cluster).items()
    assert state == "RUNNING"
    shown = cluster.ctld("scontrol", "show", "job", job).stdout
    assert re.search(r"\bNumCPUs=2\b", shown) and re.search(r"\bTimeLimit=00:45:00\b", shown), shown
    assert re.search(r"\bmem=512M\b", shown) and re.search(r"\bUserId=alice\(2001\)", shown), shown
    # the notebook alice opens: one cell that prints her uid and the job id and writes a file in her $HOME. It is
    # written beforehand (as alice, over SSH) and run from JupyterLab's Run menu, by clicks: keys typed into a
    # fresh notebook's editor were refused or lost under CI's load ("element not interactable")
    write_notebook(cluster, NOTEBOOK, CELL)
    output = run_notebook(cluster, browser, NOTEBOOK, CELL)
    assert output.split() == ["uid", "2001", "job", job], output
    assert cluster.ssh("cat ~/from-the-portal.txt").stdout == job
    cluster.notebook_job = job


def write_notebook(cluster, name, code):
    """A notebook of one code cell `code` in alice's $HOME, written as alice through the login pod."""
    notebook = {"nbformat": 4, "nbformat_minor": 5, "cells": [
        {"cell_type": "code", "id": "portal-check", "metadata": {}, "execution_count": None, "outputs": [],
         "source": code}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}}
    cluster.ssh("cat > ~/%s <<'EOF'\n%s\nEOF" % (name, json.dumps(notebook)))


def displayed(driver, selector):
    """The elements matching `selector` that are shown (a panel being attached may hold hidden copies)."""
    from selenium.webdriver.common.by import By
    return [element for element in driver.find_elements(By.CSS_SELECTOR, selector) if element.is_displayed()]


def run_notebook(cluster, browser, name, code, attempts=3):
    """Open the notebook `name` of alice's $HOME in JupyterLab, wait until its cell shows `code` and its kernel is
    idle, run it from the Run menu (Run All Cells) and return the cell's output. A run that shows no output within
    a minute is asked again (the code then runs twice, so it must not mind): each retry leaves a screenshot and is
    counted in the timings (cell_retries)."""
    browser.get("%s/user/alice/lab/tree/%s" % (URL, name))
    wait(browser, lambda d: [e for e in displayed(d, ".jp-NotebookPanel .jp-Cell .cm-content") if e.text.strip() == code],
         120, "the notebook's cell showing its code")
    # a cell run before the kernel is connected is lost: wait for it first
    wait(browser, lambda d: displayed(d, ".jp-Notebook-ExecutionIndicator[data-status='idle']"), 120, "the kernel")
    browser.shot("notebook")
    cluster.timings["cell_retries"] = 0
    for attempt in range(1, attempts + 1):
        wait(browser, lambda d: [e for e in displayed(d, ".lm-MenuBar-item") if e.text.strip() == "Run"], 30,
             "the Run menu")[0].click()
        wait(browser, lambda d: displayed(d, RUN_ALL_CELLS), 30, "Run All Cells in the Run menu")[0].click()
        try:
            output = wait(browser, lambda d: [e for e in displayed(d, ".jp-OutputArea-output") if e.text], 60,
                          "the cell's output")[0].text
        except AssertionError:
            if attempt == attempts:
                raise
            browser.shot("cell-not-run-%d" % attempt)
            cluster.timings["cell_retries"] = attempt
            continue
        browser.shot("cell")
        return output
    return None


def test_the_notebook_outlives_a_replaced_hub_pod(cluster, browser):
    from selenium.webdriver.common.by import By
    (pod,) = cluster.kube.pods(cluster.namespace, "app.kubernetes.io/name=portal")
    cluster.kube.kubectl("delete", "pod", pod, "-n", cluster.namespace, "--wait=true")
    wait_for(lambda: [p for name, p in cluster.kube.pods(cluster.namespace, "app.kubernetes.io/name=portal").items()
                      if name != pod and cluster.kube.is_ready(p)], 180, "a new hub pod Ready")
    wait_for(hub_answers, 60, "the new hub to answer through the Service")
    assert notebook_jobs(cluster) == {cluster.notebook_job: "RUNNING"}
    # the hub's database kept the server: the lab opens again through the new hub, with no new job
    browser.get(URL + "/user/alice/lab?reset")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-LauncherCard"), 120, "JupyterLab through the new hub")
    browser.shot("lab-after-hub-restart")
    assert notebook_jobs(cluster) == {cluster.notebook_job: "RUNNING"}


def stop_taken(driver):
    """Whether the hub's home page took the click on Stop My Server: its script disables Start at once and hides
    Stop once the hub has stopped the server."""
    return not displayed(driver, "#stop") or driver.execute_script(
        "var start = document.getElementById('start'); return !!start && start.hasAttribute('disabled');")


def stop_server(cluster, browser, attempts=3):
    """Click Stop My Server on the hub's home page until the page takes the click (one made before the page's
    script has bound the button is lost: CI saw the job still queued two minutes later). Each retry, on a
    reloaded page, leaves a screenshot and is counted in the timings (stop_retries, over the module)."""
    cluster.timings.setdefault("stop_retries", 0)
    for attempt in range(1, attempts + 1):
        browser.get(URL + "/hub/home")
        if attempt > 1:
            # the reloaded page has Start, and Stop only while the server runs: no Stop, the last click was taken
            wait(browser, lambda d: displayed(d, "#start") or displayed(d, "#stop"), 60, "the hub's home page")
            if not displayed(browser, "#stop"):
                return
        wait(browser, lambda d: displayed(d, "#stop"), 60, "the Stop My Server button")[0].click()
        try:
            wait(browser, stop_taken, 30, "the click on Stop My Server to be taken")
            return
        except AssertionError:
            if attempt == attempts:
                raise
            browser.shot("stop-not-taken-%d" % attempt)
            cluster.timings["stop_retries"] += 1


def test_stopping_the_server_ends_its_slurm_job(cluster, browser):
    stop_server(cluster, browser)
    wait_for(lambda: notebook_jobs(cluster) == {}, 120, "the notebook job to leave the queue")
    browser.shot("stopped")
    wait_for(lambda: cluster.accounted_state(cluster.notebook_job)[:1] in (["CANCELLED+"], ["COMPLETED"]), 60,
             "job %s ended in sacct (last: %s)" % (cluster.notebook_job, cluster.accounted_state(cluster.notebook_job)))


def test_a_drained_node_is_not_chosen(cluster, browser):
    from selenium.webdriver.common.by import By
    cluster.ctld("scontrol", "update", "nodename=slurmd-0", "state=drain", "reason=portal-test")
    try:
        browser.get(URL + "/hub/spawn")
        wait(browser, lambda d: d.find_elements(By.ID, "cpus"), 60, "the options form")
        browser.find_element(By.CSS_SELECTOR, "form input[type=submit], form button[type=submit]").click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-LauncherCard"), 180, "JupyterLab's launcher")
        browser.shot("lab-with-slurmd-0-drained")
        (job,) = notebook_jobs(cluster)
        assert cluster.ctld("squeue", "-h", "-j", job, "-o", "%N").stdout.strip() == "slurmd-1"
        stop_server(cluster, browser)
        wait_for(lambda: notebook_jobs(cluster) == {}, 120, "the notebook job to leave the queue")
    finally:
        cluster.ctld("scontrol", "update", "nodename=slurmd-0", "state=resume", check=False)


@pytest.mark.parametrize("variables, message", [
    ({"portal_auth": "oidc"}, "portal_oidc.client_secret_secret: must be set when portal_auth is oidc"),
    ({"portal_job_options": dict(JOB_OPTIONS, partitions=["gpu"])},
     "portal_job_options.partitions[0] (gpu): is not a partition of this cluster (compute)"),
    ({"portal_job_options": dict(JOB_OPTIONS, cpus={"default": 1, "max": 4})},
     "portal_job_options.cpus.max: 4 CPUs exceeds partition compute (the CPUs of its nodes: 2 CPUs)"),
])
def test_bad_portal_settings_are_refused_before_anything_changes(cluster, variables, message):
    position = cluster.kube.audit_position()
    proc, _changed, _seconds = cluster.playbook("site", "-e", json.dumps(variables), check=False)
    assert proc.returncode != 0 and message in proc.stdout, proc.stdout[-3000:]
    assert cluster.kube.writes_since(position, cluster.namespace) == []
