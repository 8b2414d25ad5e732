"""The spawn form: its model from catalog + queue state, and the HTML it renders."""

from __future__ import annotations

import logging
from fractions import Fraction
from html.parser import HTMLParser
from typing import Any

import pytest
from traitlets.config import Config

from gpuaas_spawner import check_catalog
from gpuaas_spawner.form import FormModel, build_form_model, render_form
from gpuaas_spawner.validate import UserContext, options_from_form_data, validate_options
from jupyter_gpuaas.core.catalog import CatalogError
from jupyter_gpuaas.core.headroom import UserUsage
from jupyter_gpuaas.core.sizing import (
    HISTORY_CONFIGMAP,
    HISTORY_KEY,
    PeakHistory,
    history_json,
)
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import (
    GPU,
    MIG1,
    NAMESPACE,
    SHARED,
    FakeUser,
    catalog_data,
    local_queue,
    make_spawner,
    sample_catalog,
    state,
    team_a_notebooks,
)

CATALOG = sample_catalog()
ALICE = UserContext("alice", ("team-a",))
CAROL = UserContext("carol", ("team-a", "team-b"))

BUSY = state(
    [
        team_a_notebooks(
            usage={("h100", GPU): 2, ("l4-shared", SHARED): 12, ("a100-mig", MIG1): 7}, pending=2
        ),
        team_a_notebooks() | {"metadata": {"name": "team-b-notebooks"}},
    ]
)


def _model(user: UserContext = ALICE, **kw: Any) -> FormModel:
    return build_form_model(CATALOG, user, kw.pop("state", BUSY), namespace=NAMESPACE, **kw)


def test_model_lists_the_teams_offerings_with_live_state() -> None:
    model = _model()
    (team,) = model.teams
    assert (team.name, team.selected) == ("team-a", True)
    rows = [(o.slug, o.state, o.status, o.selectable, o.checked) for o in team.offerings]
    assert rows == [
        ("h100", "queue", "will queue: about 2 ahead of you", True, False),
        ("mig-1g", "queue", "will queue: about 2 ahead of you", True, False),  # team's default
        ("mig-3g", "now", "available now (2 of 2 free)", True, True),  # as large, starts now
        ("shared", "now", "available now (4 of 16 free)", True, False),
        ("cpu", "now", "available now", True, False),
    ]
    h100, mig1, _, shared, cpu = team.offerings
    assert (h100.gpu_model, h100.gpu_memory, h100.isolation, h100.gpu_equivalents) == (
        "NVIDIA H100 80GB HBM3",
        "80 GiB",
        "whole GPU, not shared with anyone",
        "1",
    )
    assert h100.counts == (1, 2)
    assert mig1.counts == (1,)
    assert (mig1.isolation, mig1.gpu_equivalents, mig1.gpu_status) == (
        "hardware-isolated MIG slice",
        "0.14",
        "",
    )
    assert (shared.isolation, shared.gpu_status) == ("time-shared, no memory isolation", "")
    # GPU-equivalents are ITOps' unit: the data scientist's page shows the offering's own units.
    assert "GPU-eq" not in render_form(model)
    assert cpu.isolation == "no GPU"
    assert [(i.slug, i.offerings, i.default_for) for i in model.images] == [
        ("scipy", ("cpu", "mig-1g", "mig-3g", "shared"), ("cpu", "mig-1g", "mig-3g", "shared")),
        ("pytorch", ("cpu", "h100", "mig-1g", "mig-3g", "shared"), ("h100",)),
    ]
    assert [(s.slug, s.offerings) for s in model.sizes] == [
        ("small", ("cpu", "mig-1g", "mig-3g", "shared")),
        ("large", ("cpu", "h100", "mig-1g", "mig-3g", "shared")),
    ]


def test_caps_grey_out_gpu_offerings_with_the_reason() -> None:
    user = UserContext("alice", ("team-a",), UserUsage(gpu_servers=2, gpu_equivalents=Fraction(1)))
    team = _model(user).teams[0]
    states = {o.slug: (o.selectable, o.status) for o in team.offerings}
    assert states["h100"] == (False, "limit: 2 GPU servers per user")
    assert states["cpu"] == (True, "available now")
    assert [o.slug for o in team.offerings if o.checked] == ["cpu"]  # default not selectable


def test_several_teams_previous_choice_preselected() -> None:
    model = _model(
        CAROL,
        previous={"team": "team-b", "offering": "shared", "image": "pytorch", "size": "large"},
    )
    assert [(t.name, t.selected) for t in model.teams] == [("team-a", False), ("team-b", True)]
    team_a, team_b = model.teams
    assert [o.slug for o in team_b.offerings if o.checked] == ["shared"]
    assert [
        o.slug for o in team_a.offerings if o.checked
    ] == []  # one radio group: only one checked
    assert [o.slug for o in team_a.offerings if o.preferred] == ["mig-3g"]  # mig-1g queues
    assert (model.selected_image, model.selected_size) == ("pytorch", "large")


def test_no_team_and_unknown_state() -> None:
    model = _model(UserContext("dave", ("staff",)))
    assert model.teams == ()
    assert "not in any team" in model.problem
    html = render_form(model)
    assert 'role="alert"' in html
    assert "<input" not in html
    unknown = _model(state=state([], synced=False)).teams[0]
    assert {o.state for o in unknown.offerings} == {"unknown"}
    assert all(o.selectable for o in unknown.offerings)


# ----------------------------------------------------------------------------- the HTML


class Page(HTMLParser):
    """Collects elements, ids, and what a browser without JavaScript would submit."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.ids: list[str] = []
        self.disabled_depth: list[bool] = []
        self.submitted: dict[str, list[str]] = {}
        self.select: tuple[str, bool, list[tuple[str, bool, bool]]] | None = None
        self.labels_for: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.elements.append((tag, a))
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "label" and a.get("for"):
            self.labels_for.append(str(a["for"]))
        off = any(self.disabled_depth) or "disabled" in a
        if tag == "fieldset":
            self.disabled_depth.append("disabled" in a)
        elif tag == "input" and not off and a.get("name"):
            if a.get("type") == "hidden" or (a.get("type") == "radio" and "checked" in a):
                self.submitted.setdefault(str(a["name"]), []).append(str(a.get("value")))
        elif tag == "select":
            self.select = (str(a.get("name")), off, [])
        elif tag == "option" and self.select is not None:
            self.select[2].append((str(a.get("value")), "selected" in a, "disabled" in a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "fieldset":
            self.disabled_depth.pop()
        elif tag == "select" and self.select is not None:
            name, off, options = self.select
            if not off and options:
                chosen = [v for v, sel, _ in options if sel] or [options[0][0]]
                self.submitted.setdefault(name, []).append(chosen[-1])
            self.select = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _page(model: FormModel) -> Page:
    page = Page()
    page.feed(render_form(model))
    page.close()
    return page


def test_html_is_accessible_and_consistent() -> None:
    page = _page(_model(CAROL, previous={"team": "team-b"}))
    assert len(page.ids) == len(set(page.ids)), "duplicate ids"
    ids = set(page.ids)
    for tag, a in page.elements:
        if tag == "input" and a.get("type") in ("radio", "checkbox"):
            assert a.get("id") in page.labels_for, f"radio without a label: {a}"
        if tag == "select":
            assert a.get("id") in page.labels_for, f"select without a label: {a}"
        for ref in (a.get("aria-describedby") or "").split():
            assert ref in ids, f"aria-describedby points nowhere: {ref}"
    legends = [t for t, _ in page.elements if t == "legend"]
    fieldsets = [a for t, a in page.elements if t == "fieldset"]
    assert len(legends) == len(fieldsets) == 3  # team choice + one per team
    hidden = [a["data-team"] for a in fieldsets if "hidden" in a and "data-team" in a]
    assert hidden == ["team-a"]
    text = " ".join(" ".join(page.text).split())
    assert "Team to charge" in text
    assert "GPU for Team B" in text


def test_unavailable_offerings_are_disabled_and_say_why() -> None:
    user = UserContext("alice", ("team-a",), UserUsage(gpu_servers=2, gpu_equivalents=Fraction(1)))
    page = _page(_model(user))
    radios = {
        a["value"]: a for t, a in page.elements if t == "input" and a.get("name") == "offering"
    }
    assert "disabled" in radios["h100"]
    assert radios["h100"].get("aria-disabled") == "true"
    assert "disabled" not in radios["cpu"]
    text = " ".join(" ".join(page.text).split())
    assert "Not available: limit: 2 GPU servers per user" in text


def test_a_browser_post_of_the_page_as_served_is_accepted() -> None:
    for user, previous in [
        (ALICE, None),
        (CAROL, {"team": "team-b", "offering": "shared"}),
        (CAROL, {"team": "team-a", "offering": "h100"}),
    ]:
        page = _page(_model(user, previous=previous))
        options = options_from_form_data(page.submitted, CATALOG)
        choice = validate_options(options, CATALOG, user)
        expected = previous or {"team": "team-a", "offering": "mig-3g"}  # mig-1g queues
        assert (choice.tenant.name, choice.offering.slug) == (
            expected["team"],
            expected["offering"],
        )
        assert choice.image is not None
        assert choice.size is not None


def test_notice_and_catalog_text_are_escaped() -> None:
    model = _model(notice='<script>alert("x")</script> Your last server was preempted')
    html = render_form(model)
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; Your last server was preempted" in html
    assert 'role="status"' in html


def test_one_team_posts_it_as_a_hidden_field_and_counts_are_per_offering() -> None:
    page = _page(
        _model(state=state([team_a_notebooks()], [local_queue("team-a", "team-a-notebooks")]))
    )
    assert page.submitted["team"] == ["team-a"]
    selects = [a["name"] for t, a in page.elements if t == "select"]
    assert selects == ["count-h100", "image", "size"]


# ----------------------------------------------------------------------------- through the spawner


def _view() -> StaticKueueView:
    return StaticKueueView(
        cluster_queues=[team_a_notebooks(usage={("h100", GPU): 2}, pending=2)],
        local_queues=[local_queue("team-a", "team-a-notebooks")],
    )


async def test_spawner_renders_the_form_from_its_caches(kubeconfig: None) -> None:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), _view())
    html = await spawner.get_options_form()
    assert 'id="gpuaas-form"' in html
    assert "will queue: about 2 ahead of you" in html
    assert "available now (7 of 7 free)" in html


def _quota_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("gpuaas: start ")]


async def test_a_start_that_queues_is_logged_once_for_an_admin(
    kubeconfig: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The form post and the spawn both validate; only the spawn's says, in the hub's log,
    who queues in which team and why (the user sees "will queue" in plain words)."""
    caplog.set_level(logging.INFO)
    spawner = make_spawner(FakeUser("alice", ["team-a"]), _view())
    spawner._gpuaas_options_from_form({"team": ["team-a"], "offering": ["h100"]})
    assert _quota_lines(caplog) == []
    await spawner._run_apply_user_options({"offering": "h100"})
    (line,) = _quota_lines(caplog)
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith(
        "gpuaas: start queues user=alice team=team-a offering=h100 cluster_queue=team-a-notebooks"
    )
    caplog.clear()
    await spawner._run_apply_user_options({"offering": "cpu"})  # starts now: nothing to say
    assert _quota_lines(caplog) == []


async def test_a_start_refused_for_its_queue_logs_kueues_words_for_an_admin(
    kubeconfig: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Team A's LocalQueue is missing: the user is told the queue is not set up (no Kueue
    words); the hub's log names the user, the team and the missing object (admin_detail)."""
    from gpuaas_spawner.hubcompat import SpawnException

    caplog.set_level(logging.INFO)
    view = StaticKueueView(cluster_queues=[team_a_notebooks()], local_queues=[])
    spawner = make_spawner(FakeUser("alice", ["team-a"]), view)
    with pytest.raises(SpawnException) as info:
        await spawner._run_apply_user_options({"offering": "h100"})
    assert "LocalQueue" not in str(info.value.jupyterhub_message)
    (line,) = _quota_lines(caplog)
    assert line.levelno == logging.WARNING
    text = line.getMessage()
    assert text.startswith("gpuaas: start refused user=alice team=team-a offering=h100")
    assert "fit=not-allowed" in text
    assert "LocalQueue" in text  # Kueue's explanation, for the admin only


async def test_a_broken_catalog_shows_a_problem_and_refuses_spawns(kubeconfig: None) -> None:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), _view())
    spawner.tenants = [
        {"name": "team-a", "groups": ["team-a"], "local_queue": "team-a", "offerings": ["nope"]}
    ]
    html = await spawner.get_options_form()
    assert "GPU servers are misconfigured; an admin has been told (see the hub log)." in html
    from gpuaas_spawner.hubcompat import SpawnException

    with pytest.raises(SpawnException) as info:
        await spawner._run_apply_user_options({})
    assert info.value.status_code == 500  # an admin's error counts as a hub error


def test_check_catalog_for_hub_start() -> None:
    c = Config()
    data = catalog_data()
    c.GPUaaSSpawner.offerings = data["offerings"]
    c.GPUaaSSpawner.tenants = data["tenants"]
    c.GPUaaSSpawner.images = data["images"]
    c.GPUaaSSpawner.sizes = data["sizes"]
    assert set(check_catalog(c).tenants) == {"team-a", "team-b"}
    c.GPUaaSSpawner.tenants[0]["offerings"] = ["h100", "tpu"]
    with pytest.raises(
        CatalogError, match=r"GPUaaSSpawner.tenants\[0\].offerings\[1\]: unknown offering 'tpu'"
    ):
        check_catalog(c)


def test_a_fraction_shows_its_cap_its_isolation_and_the_pool_in_its_units() -> None:
    from tests.support.samples import TOTAL_GPUCORES, TOTAL_GPUMEM, fraction_catalog

    hami = {
        ("l4-hami", GPU): (16, 0, None),
        ("l4-hami", TOTAL_GPUMEM): (98304, 0, None),
        ("l4-hami", TOTAL_GPUCORES): (400, 0, None),
    }
    used = {
        ("l4-hami", GPU): 13,
        ("l4-hami", TOTAL_GPUMEM): 57344,
        ("l4-hami", TOTAL_GPUCORES): 325,
    }
    qs = state([team_a_notebooks(quotas=hami, usage=used)])
    model = build_form_model(fraction_catalog(), ALICE, qs, namespace=NAMESPACE)
    (team,) = model.teams
    quarter = next(o for o in team.offerings if o.slug == "l4-quarter")
    assert quarter.status == "available now (3 of 16 quarter-L4s free)"
    assert quarter.fraction == "5.5 GiB GPU memory (capped), 25% of its compute"
    assert quarter.isolation == (
        "memory-limited, no fault isolation; a cap against accidents, not a hard limit"
    )
    assert quarter.gpu_status == "40 of 96 GiB of fractional GPU memory free"
    html = render_form(model)
    assert "5.5 GiB GPU memory (capped), 25% of its compute" in html
    assert "NVIDIA L4 (22.49 GiB)" in html


def test_what_fits_the_measured_use_is_preselected_before_the_last_choice() -> None:
    # MiB: 6 GiB x 1.25 needs more than mig-1g's 5 GiB; mig-3g starts now
    model = _model(previous={"team": "team-a", "offering": "h100"}, peaks_mib=[6 * 1024, 2 * 1024])
    (team,) = model.teams
    assert [(o.slug, o.checked, o.advised) for o in team.offerings if o.checked or o.advised] == [
        ("mig-3g", True, True)
    ]
    assert team.advice == (
        "Your last 2 sessions peaked at 6 GiB; 20 GiB is enough: A100 MIG 3g.20gb."
    ), team.advice
    html = render_form(model)
    assert 'id="gpuaas-advice-team-a"' in html
    assert "fits your use" in html


def test_advice_the_user_cannot_start_now_is_neither_preselected_nor_shown() -> None:
    capped = UserContext(
        "alice", ("team-a",), UserUsage(gpu_servers=2, gpu_equivalents=Fraction(1))
    )
    (team,) = _model(capped, peaks_mib=[6 * 1024]).teams
    assert [o.slug for o in team.offerings if o.checked] == ["cpu"]
    assert team.advice == ""


def test_no_history_keeps_the_last_choice_then_the_default() -> None:
    (team,) = _model(previous={"offering": "shared"}).teams  # shared starts now
    assert [o.slug for o in team.offerings if o.checked] == ["shared"]
    assert team.advice == ""
    (team,) = _model(state=FREE).teams  # the default starts now
    assert [o.slug for o in team.offerings if o.checked] == ["mig-1g"]
    assert team.advice == ""


FREE = state([team_a_notebooks(), team_a_notebooks() | {"metadata": {"name": "team-b-notebooks"}}])
"""Nothing used: every offering starts now."""


def test_what_fits_and_starts_now_is_preselected_over_what_fits_and_would_queue() -> None:
    """Alice after the reclaim (her 1g slice now held by the Job she was reclaimed
    for) and bob (never measured; his team's usual slice queues) were offered the slice that
    queued. The smallest that fits and starts now is preselected, and the line says why."""
    (team,) = _model(peaks_mib=[2 * 1024]).teams  # 2.5 GiB fits mig-1g (queues), mig-3g (now)
    assert [(o.slug, o.state) for o in team.offerings if o.checked] == [("mig-3g", "now")]
    assert [o.slug for o in team.offerings if o.advised] == ["mig-3g"]
    assert team.advice == (
        "Your last session peaked at 2 GiB; 5 GiB is enough, but A100 MIG 1g.5gb would queue: "
        "A100 MIG 3g.20gb (20 GiB) fits and starts now."
    )
    (bob,) = _model(UserContext("bob", ("team-a",))).teams
    assert [o.slug for o in bob.offerings if o.checked] == ["mig-3g"]
    assert [o.slug for o in bob.offerings if o.advised] == []  # nothing measured: no badge
    assert bob.advice == (
        "No GPU use measured yet. Your team's usual choice, A100 MIG 1g.5gb, would queue; "
        "A100 MIG 3g.20gb, at least as large, starts now."
    )
    assert "starts now" in render_form(_model(UserContext("bob", ("team-a",))))


def test_when_nothing_that_fits_starts_now_the_line_says_it_would_queue() -> None:
    (team,) = _model(peaks_mib=[30 * 1024]).teams  # 37.5 GiB: only the H100, which queues
    assert [o.slug for o in team.offerings if o.checked] == ["h100"]
    assert team.advice == (
        "Your last session peaked at 30 GiB; 80 GiB is enough: NVIDIA H100. "
        "It would queue: nothing that fits starts now."
    )
    carol, _ = _model(CAROL, previous={"team": "team-a", "offering": "h100"}).teams
    assert [o.slug for o in carol.offerings if o.checked] == ["h100"]  # her last choice
    assert carol.advice == (
        "No GPU use measured yet: your last choice. "
        "It would queue: nothing at least as large starts now."
    )


class HistoryAPI:
    """The hub's CoreV1Api as far as the usage history goes: one ConfigMap, or a status."""

    def __init__(self, data: dict[str, str] | None = None, status: int = 0) -> None:
        self.data, self.status, self.reads = data, status, 0

    async def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        from kubernetes_asyncio.client import V1ConfigMap
        from kubernetes_asyncio.client.rest import ApiException

        self.reads += 1
        assert (name, namespace) == (HISTORY_CONFIGMAP, NAMESPACE)
        if self.status:
            raise ApiException(status=self.status, reason="Forbidden")
        return V1ConfigMap(data=self.data)


def _history(**peaks_mib: list[int]) -> dict[str, str]:
    return {HISTORY_KEY: history_json(PeakHistory({u: tuple(p) for u, p in peaks_mib.items()}))}


async def test_spawner_preselects_from_the_recorded_history(kubeconfig: None) -> None:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), _view())
    spawner.usage_history_max_age = 0  # read at every render
    spawner.api = HistoryAPI(_history(alice=[6 * 1024, 1024], bob=[70 * 1024]))
    html = await spawner.get_options_form()
    assert "Your last 2 sessions peaked at 6 GiB; 20 GiB is enough: A100 MIG 3g.20gb." in html
    assert 'value="mig-3g" id="gpuaas-team-a-mig-3g"' in html
    assert _checked(html) == ["mig-3g"]

    spawner.size_advice = False  # the admin's switch: the team's default again
    html = await spawner.get_options_form()
    assert "gpuaas-advice" not in html
    assert _checked(html) == ["mig-1g"]


@pytest.mark.parametrize(
    ("api", "logged"),
    [
        (HistoryAPI({HISTORY_KEY: '{"peaks_mib": {"alice": "lots"}}'}), "ignored: peaks_mib"),
        (HistoryAPI({HISTORY_KEY: "{broken"}), "ignored: state.json: not JSON"),
        (HistoryAPI(status=403), "cannot read gpuaas-usage-history: 403"),
        (HistoryAPI(status=404), ""),  # nothing recorded yet: not a problem
    ],
)
async def test_a_history_that_cannot_be_used_gives_the_default_and_a_log_line(
    kubeconfig: None, api: HistoryAPI, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), _view())
    spawner.usage_history_max_age = 0
    spawner.api = api
    html = await spawner.get_options_form()
    assert api.reads == 1
    assert "gpuaas-advice" not in html
    assert _checked(html) == ["mig-1g"]  # the team's default
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(logged in w for w in warnings) if logged else not warnings, warnings


def _checked(html: str) -> list[str]:
    """Slugs of the offering radios checked as served."""
    found: list[str] = []

    class Radios(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "input" and a.get("name") == "offering" and "checked" in a:
                found.append(str(a.get("value")))

    Radios().feed(html)
    return found


def test_an_idle_gpu_session_is_not_moved_to_cpu_only_unasked() -> None:
    """After a reclaim, alice's last session had used no GPU memory, and Start again
    preselected "CPU only" for a MIG user. A change between CPU only and a GPU is never
    preselected: her slice is, and the advice stays beside it as a suggestion."""
    (team,) = _model(previous={"team": "team-a", "offering": "mig-3g"}, peaks_mib=[0]).teams
    assert [o.slug for o in team.offerings if o.checked] == ["mig-3g"]
    assert [o.slug for o in team.offerings if o.advised] == ["cpu"]
    assert team.advice.startswith("Your last session used no GPU memory")
    # without a GPU choice of her own to keep, the advice is preselected as before
    (team,) = _model(peaks_mib=[0]).teams
    assert [o.slug for o in team.offerings if o.checked] == ["cpu"]


def test_start_again_after_a_stop_not_chosen_restarts_what_the_person_had() -> None:
    """After a reclaim (the notice says why the server stopped), the last offering is
    preselected where it starts now, though the measured use would advise a larger one; the
    advice is said beside it. Where it would queue now, the advice (which starts now) is."""
    previous = {"team": "team-a", "offering": "shared"}
    (team,) = _model(previous=previous, peaks_mib=[6 * 1024], notice="reclaimed").teams
    assert [o.slug for o in team.offerings if o.checked] == ["shared"]
    assert [o.slug for o in team.offerings if o.advised] == ["mig-3g"]
    assert team.advice.startswith("Your last session peaked at 6 GiB")
    (team,) = _model(previous=previous, peaks_mib=[6 * 1024]).teams  # no stop to undo
    assert [o.slug for o in team.offerings if o.checked] == ["mig-3g"]
    # mig-1g would queue (BUSY): the advice that starts now is preselected instead
    previous = {"team": "team-a", "offering": "mig-1g"}
    (team,) = _model(previous=previous, peaks_mib=[1024], notice="reclaimed").teams
    assert [o.slug for o in team.offerings if o.checked] == ["mig-3g"]
