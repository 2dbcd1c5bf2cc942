//! docs/scale-out.md's Slurm scripts, read from the page as it stands and submitted to a real
//! Slurm cluster of one node that each test starts for itself (`common::slurm`: Debian's
//! munged, slurmctld and slurmd, stopped on every way out): the sharded study as a job array
//! of four tasks, whose folder then holds every shard's marker, every point and one report,
//! drawn once; and the generator fleet as one `srun -n 3` step against a `latlab echo` on
//! loopback, whose three runs `latlab merge` makes one and `latlab check` gates. Only the
//! scripts' arguments (the folders, the target) and latlab's place on the `PATH` come from
//! the test.
//!
//! Root, the packages `slurm-wlm` and `munge`, and namespaces for the study: a skip without
//! them, a failure under `CI=true` (`.ci/run` installs them).

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use common::slurm::Cluster;

#[test]
fn the_sharded_study_of_scale_out_md_runs_as_a_slurm_job_array() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let script = cluster.script("study.sh", &scale_out_script("latlab-study"));
    let out = cluster.dir().join("emulator-study");
    let job = cluster.sbatch(&[], &script, &[out.as_os_str()]);
    assert!(job.status.success(), "{}\n{}", job.said, cluster.logs());
    let logs = cluster.job_logs(job.job);
    let tasks: Vec<String> = (1..=4)
        .map(|i| format!("slurm-{}_{i}.out", job.job))
        .collect();
    assert_eq!(
        logs.keys().cloned().collect::<Vec<_>>(),
        tasks,
        "a log per task"
    );

    // Each task left its shard's marker.
    let finished: Vec<u64> = (1..=4)
        .map(|i| {
            let marker = common::read_json(&out.join(format!("shards/{i}-of-4.json")));
            assert_eq!(marker["index"], i, "{marker}");
            assert_eq!(marker["count"], 4, "{marker}");
            marker["finished_unix_ns"].as_u64().unwrap()
        })
        .collect();

    // The report was drawn once: one task says it drew it, the claim in shards/report.json
    // names that task, made once every shard had finished; the others say where it is drawn.
    let drew: Vec<&String> = logs
        .iter()
        .filter(|(_, log)| log.lines().any(|l| l.starts_with("report: ")))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(drew.len(), 1, "{logs:#?}");
    let claim = common::read_json(&out.join("shards/report.json"));
    assert_eq!(
        *drew[0],
        format!("slurm-{}_{}.out", job.job, claim["index"]),
        "{claim}"
    );
    assert_eq!(claim["count"], 4, "{claim}");
    let last = finished.iter().max().unwrap();
    assert!(
        claim["claimed_unix_ns"].as_u64().unwrap() >= *last,
        "{claim}"
    );
    for (name, log) in logs.iter().filter(|(name, _)| *name != drew[0]) {
        assert!(
            log.contains("points written to"),
            "{name} neither drew the report nor said where it is:\n{log}"
        );
    }

    // Every point of the plan, from one task or another: the latency points (kernel and
    // emulator at delay 0, the emulator at each delay, the two loss models) and the forwarding
    // rate at the seven RFC 2544 frame sizes through the kernel, the emulator and, where
    // AF_XDP opens here, the emulator over AF_XDP.
    let points: Vec<String> = std::fs::read_dir(out.join("points"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".json").map(str::to_string))
        .collect();
    let mut latency: Vec<&str> = points
        .iter()
        .filter(|p| !p.starts_with("rate-"))
        .map(String::as_str)
        .collect();
    latency.sort();
    assert_eq!(
        latency,
        [
            "emu-d0ns-1000pps",
            "emu-d1000000ns-1000pps",
            "emu-d100000ns-1000pps",
            "kernel-d0ns-1000pps",
            "loss-bernoulli-d0ns-10000pps",
            "loss-gemodel-d0ns-10000pps",
        ]
    );
    let rates = |path: &str| {
        let prefix = format!("rate-{path}-");
        points
            .iter()
            .filter(|p| {
                p.strip_prefix(&prefix)
                    .is_some_and(|s| s.parse::<u32>().is_ok())
            })
            .count()
    };
    assert_eq!((rates("kernel"), rates("emu")), (7, 7), "{points:?}");
    assert!([0, 7].contains(&rates("emu-xdp")), "{points:?}");

    // The report is whole: drawn again from the points alone it is the same, byte for byte,
    // and no shard is missing from it.
    let said = common::report_redraws_as_written(&out);
    assert!(!said.contains("missing"), "{said}");
}

#[test]
fn the_generator_fleet_of_scale_out_md_runs_as_one_srun_step_merged_and_gated() {
    let _turn = common::engines();
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let mut echo = Command::new(cargo_bin("latlab"));
    echo.args(["echo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo: listening on ");
    let target = echo.word_after("listening on ");
    let script = cluster.script("fleet.sh", &scale_out_script("latlab-fleet"));
    let fleet = cluster.dir().join("fleet");
    // Slurm refuses three tasks on fewer cores than three unless they may share them.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options: &[&str] = if cores < 3 { &["--overcommit"] } else { &[] };
    let job = cluster.sbatch(options, &script, &[OsStr::new(&target), fleet.as_os_str()]);
    let logs = cluster.job_logs(job.job);
    let log = logs.values().cloned().collect::<Vec<_>>().join("\n");
    // The job's exit code is the gates': 0, every one passed on the merged result.
    assert!(job.status.success(), "{}\n{}", job.said, cluster.logs());
    for gate in ["PASS loss<=1%", "PASS p99<=50ms"] {
        assert!(log.lines().any(|l| l.starts_with(gate)), "{gate}:\n{log}");
    }

    let runs: Vec<serde_json::Value> = (0..3)
        .map(|n| common::read_json(&fleet.join(format!("gen-{n}/summary.json"))))
        .collect();
    let merged = common::read_json(&fleet.join("merged/summary.json"));
    let from = merged["merged_from"].as_array().expect("merged_from");
    assert_eq!(from.len(), 3, "{merged}");
    for (n, (entry, run)) in from.iter().zip(&runs).enumerate() {
        let dir = entry["dir"].as_str().unwrap();
        assert!(Path::new(dir).ends_with(format!("gen-{n}")), "{entry}");
        assert_eq!(entry["run_id"], run["run_id"], "{entry}");
        assert_eq!(entry["sent"], run["sent"], "{entry}");
        assert!(run["sent"].as_u64().unwrap() > 0, "gen-{n} sent nothing");
    }
    let mut ids: Vec<u64> = runs.iter().map(|r| r["run_id"].as_u64().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three runs, three run ids");
    for count in ["sent", "received", "lost"] {
        let sum: u64 = runs.iter().map(|r| r[count].as_u64().unwrap()).sum();
        assert_eq!(merged[count], sum, "merged {count}: {merged}");
    }
}

/// The script of docs/scale-out.md that is the Slurm job `name` (its `#SBATCH
/// --job-name=NAME`), as the page shows it: the one `sh` block that names it.
fn scale_out_script(name: &str) -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/scale-out.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let job = format!("\n#SBATCH --job-name={name}\n");
    let scripts: Vec<&str> = text
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .filter(|block| block.contains(&job))
        .collect();
    assert_eq!(
        scripts.len(),
        1,
        "docs/scale-out.md: one script named {name}"
    );
    assert!(scripts[0].starts_with("#!/bin/sh\n"), "{}", scripts[0]);
    scripts[0].to_string()
}
