"""``fmcluster destroy``: reverse-order teardown, then a scan for anything still tagged for the cluster."""

from __future__ import annotations

from fmcluster import aws
from fmcluster.lifecycle.session import Session, confirm, load_record, run_engine, spec_of
from fmcluster.state import StateStore


def destroy(name: str, yes: bool, keep_storage: bool) -> int:
    from fmcluster import ui
    from fmcluster.leftovers import scan

    store = StateStore()
    record = load_record(store, name, aws.target().region)
    session = Session.open(spec_of(record), record.spec_path or "spec.yaml", store)
    resources = session.resources()
    kept = [r for r in resources if keep_storage and r.is_storage]
    doomed = [r for r in resources if r not in kept]
    console = ui.err_console()
    for resource in reversed(doomed):
        console.print(f"  [red]- delete[/] {resource.name}")
    for resource in kept:
        console.print(f"  [cyan]= keep[/]   {resource.name} (--keep-storage)")
    confirm(f"Destroy cluster {name} ({record.backend}, {record.region})?", yes)
    with store.locked(name, session.region, f"fmcluster destroy {name}"):
        store.set_cluster_status(name, session.region, "DELETING")
        run_engine(session, f"Destroying {name}", "destroy", doomed)
        if hasattr(session.backend, "after_teardown"):
            session.backend.after_teardown(session, yes)
        left = scan(session, keep_storage=keep_storage)
        if left:
            store.set_cluster_status(name, session.region, "DELETE_INCOMPLETE")
            console.print("[red]Still tagged for this cluster after teardown:[/]")
            for item in left:
                console.print(f"  {item}")
            console.print(f"Re-run `fmcluster destroy {name}` to retry, or delete them by hand.")
            return 1
        if kept:
            store.set_cluster_status(name, session.region, "STORAGE_KEPT")
            ui.note("kept: " + ", ".join(r.name for r in kept))
        else:
            from fmcluster.connect.ssh import forget_host_keys

            store.forget_cluster(name, session.region)
            forget_host_keys(name)
    ui.out_console().print(f"[green]✓[/] cluster [bold]{name}[/] destroyed; nothing left behind")
    return 0
