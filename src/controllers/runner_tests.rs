//! The runner script is run for real with the local `/bin/sh`, in a temporary directory.

use std::path::Path;
use std::process::Command as Process;
use std::time::{Duration, Instant};

use super::*;

fn command(argv: &[&str], stdin: Option<&str>, retries: u32, description: &str) -> Command {
    Command {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: stdin.map(|s| s.as_bytes().to_vec()),
        retries,
        description: description.to_string(),
    }
}

fn sh(script: &str, args: &[&str]) -> String {
    let out = Process::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The state directory, sentinel and CABPK success file of a node whose root is `root`.
fn node_files(root: &Path) -> [String; 3] {
    ["capd-bootstrap", "sentinel", "success"].map(|f| root.join(f).to_str().unwrap().to_string())
}

/// The node's files, with a container runtime that answers at once.
fn paths(files: &[String; 3]) -> Paths<'_> {
    Paths {
        state: &files[0],
        sentinel: &files[1],
        success: &files[2],
        runtime_check: "true",
    }
}

/// Launches `commands` staged under `root` (the node's files as [`node_files`] says); returns
/// what the launch says it did.
fn launch(root: &Path, commands: &[Command]) -> LaunchResult {
    parse_launch(&launch_checking(root, commands, "true"))
}

/// Like [`launch`] with `runtime_check` as the node's runtime check; returns the launch's output.
fn launch_checking(root: &Path, commands: &[Command], runtime_check: &str) -> String {
    let files = node_files(root);
    let text = script_in(&files[0], commands).unwrap();
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staged = root.join(format!("staged-{n}.sh"));
    std::fs::write(&staged, text).unwrap();
    let paths = Paths {
        runtime_check,
        ..paths(&files)
    };
    sh(&launch_script(paths), &[staged.to_str().unwrap()])
}

/// Probes with the state directory under `root` and CABPK's success file at `root/success`.
fn probe(root: &Path, sentinel: &Path) -> ProbeResult {
    let state = root.join("capd-bootstrap");
    let success = root.join("success");
    parse_probe(&sh(
        &probe_script(Paths {
            state: state.to_str().unwrap(),
            sentinel: sentinel.to_str().unwrap(),
            success: success.to_str().unwrap(),
            runtime_check: "true",
        }),
        &[],
    ))
}

fn wait_finished(root: &Path) -> RunnerStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Probe::Launched(status) = probe(root, &root.join("none")).probe
            && matches!(status.state, RunnerState::Succeeded | RunnerState::Failed)
        {
            return status;
        }
        assert!(Instant::now() < deadline, "runner did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_fresh_node_probes_fresh_and_a_sentinel_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let sentinel = dir.path().join("sentinel");
    let result = probe(dir.path(), &sentinel);
    assert_eq!(result.probe, Probe::Fresh);
    assert!(result.now.unwrap() > 1_600_000_000);
    std::fs::write(&sentinel, "started").unwrap();
    assert_eq!(probe(dir.path(), &sentinel).probe, Probe::SentinelOnly);
    assert!(!probe(dir.path(), &sentinel).success_file);
}

#[test]
fn cabpk_success_file_is_reported_with_or_without_a_runner() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none");
    std::fs::write(dir.path().join("success"), "success\n").unwrap();
    let fresh = probe(dir.path(), &none);
    assert_eq!(fresh.probe, Probe::Fresh);
    assert!(fresh.success_file);
    let state = dir.path().join("capd-bootstrap");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("status"), "state=running\nstep=3\ntotal=3\n").unwrap();
    let launched = probe(dir.path(), &none);
    assert!(matches!(launched.probe, Probe::Launched(_)));
    assert!(launched.success_file);
}

#[test]
fn commands_run_in_order_with_their_stdin_and_the_outcome_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("etc/kubeadm.yaml");
    let target_s = target.to_str().unwrap();
    let parent = dir.path().join("etc");
    let commands = [
        command(
            &["mkdir", "-p", parent.to_str().unwrap()],
            None,
            5,
            "create etc",
        ),
        command(
            &["/bin/sh", "-c", "cat > \"$0\"", target_s],
            Some("kind: InitConfiguration\n'quoted' $HOME `x`\n"),
            5,
            "write kubeadm.yaml",
        ),
        command(&["echo", "kubeadm init done"], None, 0, "run kubeadm"),
    ];
    assert_eq!(launch(dir.path(), &commands), LaunchResult::Launched);
    let status = wait_finished(dir.path());
    assert_eq!(status.state, RunnerState::Succeeded);
    assert_eq!((status.step, status.total), (3, 3));
    assert_eq!(status.exit_code, Some(0));
    assert!(status.started.is_some() && status.finished.is_some());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "kind: InitConfiguration\n'quoted' $HOME `x`\n"
    );
    let state = dir.path().join("capd-bootstrap");
    let log = std::fs::read_to_string(state.join("output.log")).unwrap();
    assert!(log.contains("### [3/3] run kubeadm"), "{log}");
    assert!(log.contains("kubeadm init done"), "{log}");
    assert!(
        !state.join("run.sh").exists(),
        "the script holding secrets is removed"
    );
}

#[test]
fn a_failing_command_stops_the_run_with_its_exit_code_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("after");
    let commands = [
        command(
            &[
                "/bin/sh",
                "-c",
                "echo 'error: port 6443 is in use' >&2; exit 3",
            ],
            None,
            0,
            "run kubeadm init",
        ),
        command(&["touch", marker.to_str().unwrap()], None, 0, "never"),
    ];
    launch(dir.path(), &commands);
    let status = wait_finished(dir.path());
    assert_eq!(status.state, RunnerState::Failed);
    assert_eq!(status.exit_code, Some(3));
    assert_eq!(status.step, 1);
    assert_eq!(status.description, "run kubeadm init");
    assert!(!marker.exists(), "commands after a failure do not run");
    let state = dir.path().join("capd-bootstrap");
    let tail = sh(&format!("tail -n 5 {}/output.log", state.display()), &[]);
    assert!(tail.contains("port 6443 is in use"), "{tail}");
}

#[test]
fn a_second_launch_only_observes_and_never_runs_the_commands_again() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("runs");
    let count = command(
        &[
            "/bin/sh",
            "-c",
            "echo run >> \"$0\"",
            counter.to_str().unwrap(),
        ],
        None,
        0,
        "count",
    );
    assert_eq!(
        launch(dir.path(), std::slice::from_ref(&count)),
        LaunchResult::Launched
    );
    wait_finished(dir.path());
    assert_eq!(
        launch(dir.path(), std::slice::from_ref(&count)),
        LaunchResult::AlreadyLaunched
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "run\n");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("staged-"))
        .collect();
    assert!(leftovers.is_empty(), "the refused staged script is removed");
}

#[test]
fn a_launch_whose_shell_is_killed_either_never_began_or_completes() {
    // The engine kills an exec's process when its client goes away; whenever that happens, the
    // node must not be left locked with a runner that never starts.
    for delay_ms in [0u64, 1, 2, 3, 5, 8, 13, 21] {
        let dir = tempfile::tempdir().unwrap();
        let files = node_files(dir.path());
        let state = dir.path().join("capd-bootstrap");
        let text = script_in(&files[0], &[command(&["true"], None, 0, "nothing")]).unwrap();
        let staged = dir.path().join("staged.sh");
        std::fs::write(&staged, text).unwrap();
        let mut shell = Process::new("/bin/sh")
            .arg("-c")
            .arg(launch_script(paths(&files)))
            .arg("sh")
            .arg(&staged)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = shell.kill();
        let _ = shell.wait();
        std::thread::sleep(Duration::from_millis(200));
        if state.exists() {
            let status = wait_finished(dir.path());
            assert_eq!(
                status.state,
                RunnerState::Succeeded,
                "killed after {delay_ms} ms"
            );
        } else {
            assert!(
                staged.exists(),
                "nothing happened, killed after {delay_ms} ms"
            );
        }
    }
}

#[test]
fn arguments_with_nul_bytes_are_refused() {
    let err = script(&[command(&["echo", "a\0b"], None, 0, "bad")]).unwrap_err();
    assert!(matches!(err, RunnerError::NulInArgument { step: 1, .. }));
    assert_eq!(script(&[]).unwrap_err(), RunnerError::Empty);
}

#[test]
fn probe_output_is_parsed() {
    let result = parse_probe(
        "now=1700000100\nlaunched=true\nstate=running\nstep=4\ntotal=9\nexit=\nstarted=1700000000\nfinished=\npid=42\ndescription=run kubeadm join\n",
    );
    assert_eq!(result.now, Some(1_700_000_100));
    let Probe::Launched(status) = result.probe else {
        panic!("expected launched");
    };
    assert_eq!(status.state, RunnerState::Running);
    assert_eq!(status.pid, Some(42));
    assert_eq!(status.exit_code, None);
    assert_eq!(
        progress_message(&status),
        "Running bootstrap command [run kubeadm join] (4 of 9)"
    );
    let pending = parse_probe("now=1\nlaunched=true\nstate=pending\n");
    assert!(matches!(
        pending.probe,
        Probe::Launched(RunnerStatus {
            state: RunnerState::Pending,
            ..
        })
    ));
}

/// Runs the stage-and-launch command with the node's files under `root` ([`node_files`]), the
/// script staged at `root/run/staged.sh` and `stdin` as its input; returns its output when it
/// succeeded.
fn stage_and_launch(root: &Path, script: &str, stdin: &[u8]) -> Option<String> {
    use std::io::Write;
    let files = node_files(root);
    let staged = root.join("run/staged.sh");
    let mut child = Process::new("/bin/sh")
        .arg("-c")
        .arg(stage_and_launch_script(paths(&files)))
        .arg("sh")
        .arg(&staged)
        .arg(script.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_script_staged_whole_is_launched_and_one_cut_short_is_refused_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("capd-bootstrap");
    let made = dir.path().join("made-by-bootstrap");
    let script = script_in(
        state.to_str().unwrap(),
        &[
            command(&["touch", made.to_str().unwrap()], None, 0, "a file"),
            command(&["sleep", "1"], None, 0, "a moment"),
        ],
    )
    .unwrap();
    // The connection to the engine was cut: the command's input ends early.
    assert!(stage_and_launch(dir.path(), &script, &script.as_bytes()[..10]).is_none());
    assert!(stage_and_launch(dir.path(), &script, b"").is_none());
    assert!(
        !dir.path().join("run/staged.sh").exists(),
        "a partial script is not left behind"
    );
    assert!(!state.exists(), "and nothing was launched");

    let out = stage_and_launch(dir.path(), &script, script.as_bytes()).unwrap();
    assert_eq!(parse_launch(&out), LaunchResult::Launched);
    let read = parse_probe(&out);
    assert!(read.complete, "{out}");
    assert!(
        matches!(read.probe, Probe::Launched(_)),
        "the same command reads the launched runner: {out}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(state.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600,
        "the script holds secrets"
    );
    assert_eq!(wait_finished(dir.path()).state, RunnerState::Succeeded);
    assert!(
        !dir.path().join("run/staged.sh").exists(),
        "the staged script became the runner's"
    );
    let ours = dir.path().join("made-by-the-test");
    std::fs::write(&ours, "").unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&made),
        mode(&ours),
        "bootstrap commands keep the node's umask, not the staged script's"
    );
}

#[test]
fn probe_output_cut_short_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let whole = probe(dir.path(), &dir.path().join("none"));
    assert!(whole.complete);
    let cut = parse_probe("now=1700000100\n");
    assert!(!cut.complete);
    assert_eq!(
        cut.probe,
        Probe::Fresh,
        "which is why it must not be believed"
    );
}

#[test]
fn staging_paths_are_unique_and_safe() {
    assert_eq!(
        staging_path("abc-123/../x"),
        "/run/cluster-api/capd-bootstrap.abc-123x.sh"
    );
}

#[test]
fn a_node_bootstrapped_without_the_runner_is_not_launched_and_the_staged_script_is_removed() {
    for marker in ["success", "sentinel"] {
        let dir = tempfile::tempdir().unwrap();
        let files = node_files(dir.path());
        let made = dir.path().join("made-by-bootstrap");
        let script = script_in(
            &files[0],
            &[command(
                &["touch", made.to_str().unwrap()],
                None,
                0,
                "a file",
            )],
        )
        .unwrap();
        std::fs::write(dir.path().join(marker), "").unwrap();
        let out = stage_and_launch(dir.path(), &script, script.as_bytes()).unwrap();
        assert_eq!(parse_launch(&out), LaunchResult::Skipped, "{marker}: {out}");
        let read = parse_probe(&out);
        assert!(read.complete);
        assert!(!matches!(read.probe, Probe::Launched(_)), "{marker}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(!made.exists(), "{marker}: nothing ran");
        assert!(!Path::new(&files[0]).exists(), "{marker}: no lock taken");
        assert!(
            !dir.path().join("run/staged.sh").exists(),
            "{marker}: the staged script (secrets) is removed"
        );
    }
}

#[test]
fn a_waiting_probe_waits_while_the_runner_runs_and_returns_as_soon_as_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let files = node_files(dir.path());
    let state = Path::new(&files[0]);
    std::fs::create_dir_all(state).unwrap();
    let script = wait_probe_script(paths(&files), 5);
    let timed = |what: &str| {
        let started = Instant::now();
        let result = parse_probe(&sh(&script, &[]));
        assert!(result.complete, "{what}");
        (started.elapsed(), result)
    };

    // Pending, then running another step: the probe waits its whole window (5 × 100 ms) either
    // way, then reports the status of that moment.
    for status in ["state=pending\n", "state=running\nstep=1\ntotal=2\n"] {
        std::fs::write(state.join("status"), status).unwrap();
        let (elapsed, result) = timed(status);
        assert!(
            elapsed >= Duration::from_millis(450),
            "{status}: {elapsed:?}"
        );
        assert!(matches!(result.probe, Probe::Launched(_)), "{status}");
    }

    // Ended: it answers at once with the final status.
    std::fs::write(
        state.join("status"),
        "state=succeeded\nstep=2\ntotal=2\nexit=0\n",
    )
    .unwrap();
    let (elapsed, result) = timed("succeeded");
    assert!(elapsed < Duration::from_millis(400), "{elapsed:?}");
    let Probe::Launched(status) = result.probe else {
        panic!("expected a launched runner, got {:?}", result.probe);
    };
    assert_eq!(status.state, RunnerState::Succeeded);

    // CABPK's success file appearing while the runner still runs also ends the wait.
    std::fs::write(state.join("status"), "state=running\nstep=1\ntotal=2\n").unwrap();
    std::fs::write(&files[2], "success\n").unwrap();
    let (elapsed, result) = timed("success file");
    assert!(elapsed < Duration::from_millis(400), "{elapsed:?}");
    assert!(result.success_file);

    // The status gone (a container started again from scratch): at once, as a fresh node.
    std::fs::remove_file(&files[2]).unwrap();
    std::fs::remove_dir_all(state).unwrap();
    let (elapsed, result) = timed("gone");
    assert!(elapsed < Duration::from_millis(400), "{elapsed:?}");
    assert_eq!(result.probe, Probe::Fresh);
}

#[test]
fn a_waiting_probe_follows_the_runner_s_process_and_still_waits_for_a_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = node_files(dir.path());
    let state = Path::new(&files[0]);
    std::fs::create_dir_all(state).unwrap();
    let status = state.join("status");
    let running = |pid: u32| format!("state=running\nstep=1\ntotal=1\npid={pid}\n");
    // The node's `tail`, wrapped to record how it is called: the runner's process is followed by
    // it, not only seen through the status poll.
    let real_tail = sh("command -v tail", &[]).trim().to_string();
    assert!(!real_tail.is_empty(), "this machine has tail");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tail_log = dir.path().join("tail.log");
    std::fs::write(
        bin.join("tail"),
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{real_tail}' \"$@\"\n",
            tail_log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("tail"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let timed = |tenths: u128| {
        let started = Instant::now();
        let out = Process::new("/bin/sh")
            .arg("-c")
            .arg(wait_probe_script(paths(&files), tenths))
            .env("PATH", &path)
            .output()
            .unwrap();
        let result = parse_probe(&String::from_utf8_lossy(&out.stdout));
        assert!(result.complete);
        (started.elapsed(), result)
    };

    // A runner that ends 300 ms from now, writing its final status: seen then, well within the
    // 3 s window. (Reaped at once, as the node's init reaps the real one: a zombie still counts
    // as running.)
    let runner = Process::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "sleep 0.3; printf 'state=succeeded\\nstep=1\\ntotal=1\\nexit=0\\n' > '{}'",
            status.display()
        ))
        .spawn()
        .unwrap();
    let reaper_pid = runner.id();
    std::fs::write(&status, running(reaper_pid)).unwrap();
    let reaper = std::thread::spawn(move || {
        let mut runner = runner;
        runner.wait()
    });
    let (elapsed, result) = timed(30);
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );
    assert!(matches!(
        result.probe,
        Probe::Launched(RunnerStatus {
            state: RunnerState::Succeeded,
            ..
        })
    ));
    let pid = reaper_pid;
    reaper.join().unwrap().unwrap();
    let followed = std::fs::read_to_string(&tail_log).unwrap_or_default();
    assert!(
        followed.contains(&format!("--pid={pid}")),
        "the runner's process was followed: {followed:?}"
    );

    // A runner that keeps running: the whole window (5 × 100 ms).
    let mut busy = Process::new("sleep").arg("10").spawn().unwrap();
    std::fs::write(&status, running(busy.id())).unwrap();
    let (elapsed, _) = timed(5);
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_millis(3000),
        "{elapsed:?}"
    );
    let _ = busy.kill();
    let _ = busy.wait();

    // A runner killed without a final status (its process gone, the status still running): the
    // whole window too, never a probe that answers at once again and again.
    std::fs::write(&status, running(busy.id())).unwrap();
    let (elapsed, _) = timed(5);
    assert!(elapsed >= Duration::from_millis(450), "{elapsed:?}");
}

#[test]
fn the_launch_waits_for_the_container_runtime_to_answer() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made-by-bootstrap");
    let tries = dir.path().join("tries");
    // A runtime that answers at the third try.
    let check = format!(
        "echo x >> {tries}; [ \"$(wc -l < {tries})\" -ge 3 ]",
        tries = crate::bootstrap::shell_quote(tries.to_str().unwrap())
    );
    let commands = [command(
        &["touch", made.to_str().unwrap()],
        None,
        0,
        "a file",
    )];
    let out = launch_checking(dir.path(), &commands, &check);
    assert_eq!(parse_launch(&out), LaunchResult::Launched, "{out}");
    assert_eq!(std::fs::read_to_string(&tries).unwrap().lines().count(), 3);
    assert_eq!(wait_finished(dir.path()).state, RunnerState::Succeeded);
    assert!(made.exists());
}

#[test]
fn a_runtime_that_never_answers_leaves_the_node_fresh_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let files = node_files(dir.path());
    let made = dir.path().join("made-by-bootstrap");
    let commands = [command(
        &["touch", made.to_str().unwrap()],
        None,
        0,
        "a file",
    )];
    let started = Instant::now();
    let out = launch_checking(
        dir.path(),
        &commands,
        "echo 'connecting to containerd'; echo 'connection refused' >&2; exit 7",
    );
    assert_eq!(
        parse_launch(&out),
        LaunchResult::RuntimeNotReady(
            "echo 'connecting to containerd'; echo 'connection refused' >&2; exit 7 exited with status 7: connection refused"
                .to_string()
        ),
        "{out}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(3500),
        "it was tried for about 4 s"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!made.exists(), "nothing ran");
    assert!(
        !Path::new(&files[0]).exists(),
        "no lock taken: the next launch may run"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("staged"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "the staged script (secrets) is removed: {leftovers:?}"
    );
    // Once it answers, the same node is launched.
    assert_eq!(launch(dir.path(), &commands), LaunchResult::Launched);
    assert_eq!(wait_finished(dir.path()).state, RunnerState::Succeeded);
}
