use super::*;
use latlab_bench::kernel_steps::KernelStepReport;
use latlab_study::points::{Existing, PointsDir};

fn size(frame_size: usize, ndr: u64, kept_up: bool) -> SizeResult {
    SizeResult {
        frame_size,
        source_max_pps: ndr as f64 * 1.1,
        dut_kept_up: kept_up,
        ndr_pps: Some(ndr),
        pdr_pps: Some(ndr),
        converged: true,
        ..SizeResult::default()
    }
}

fn point(dut: &str, ndr64: u64, cycles: Option<serde_json::Value>) -> DutPoint {
    DutPoint {
        dut: dut.into(),
        receive_work: "RPS on CPU 1".into(),
        sizes: vec![size(64, ndr64, false), size(1518, ndr64 * 9 / 10, false)],
        fwd_batch: None,
        fwd_poll: None,
        saturation: None,
        dut_report: cycles.map(|c| DutReport::from_value(serde_json::json!({ "cycles": c }))),
        failure: None,
        left_out: None,
    }
}

#[test]
fn the_report_has_table_one_against_the_kernel_fig_two_and_table_two() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let cycles = serde_json::json!({
        "per_packet": { "rx": 400.0, "processing": 50.0, "tx": 900.0, "buffers": 30.0 },
        "steps_total": 1380.0, "measured_untimed": 1450.0, "accounted": 0.95, "mean_batch": 7.5
    });
    points
        .write(
            "dut-fwd-xdp",
            &point("fwd-xdp", 300_000, Some(cycles)),
            None,
        )
        .unwrap();
    // The kernel's CPU at saturation: 100 000 frames through in 1 s, sampled at 10 kHz; 500
    // samples in ip_forward are 0.05 s of a 2 GHz counter: 1 000 cycles a frame.
    let functions = [
        ("ip_forward".to_string(), 500),
        ("veth_xmit".to_string(), 300),
        ("pv_native_safe_halt".to_string(), 200),
    ];
    let mut kernel = point("kernel", 200_000, None);
    kernel.saturation = Some(Saturation {
        frame_size: 64,
        seconds: 1.0,
        sent: 400_000,
        received: 100_000,
        cpu: 1,
        tsc_hz: 2e9,
        profile: Some(KernelStepReport::from_functions(&functions, 0, 10_000)),
        profile_error: None,
        lost_samples: 0,
    });
    points.write("dut-kernel", &kernel, None).unwrap();
    let mut testpmd = point("testpmd", 0, None);
    testpmd.sizes.clear();
    testpmd.left_out = Some("dpdk-testpmd is not installed".into());
    points.write("dut-testpmd", &testpmd, None).unwrap();
    points
        .write("dut-bridge", &point("bridge", 180_000, None), None)
        .unwrap();
    let md = std::fs::read_to_string(report::write(&out, "test lab").unwrap()).unwrap();
    assert!(out.join("fig2-ndr.svg").is_file());
    // The kernel first, each DUT against it.
    let kernel_row = md.find("| kernel | 0.200 | 1.00× |").expect(&md);
    assert!(
        kernel_row < md.find("| fwd-xdp | 0.300 | 1.50× |").expect(&md),
        "{md}"
    );
    assert!(md.contains("| bridge | 0.180 | 0.90× |"), "{md}");
    assert!(md.contains("| DUT | 64 B [Mpps] | 1518 B [Mpps] |"), "{md}");
    assert!(
        md.contains("| fwd-xdp | 400 | 50 | 900 | 30 | 1380 | - | 1450 | 0.95 | 7.5 |"),
        "{md}"
    );
    // Table II from the samples, against the paper's IP forward row (TX 463, Process. 757).
    assert!(
        md.contains("| kernel | 0.100 | 0 (0.0×) | 600 (1.3×) | 0 (0.0×) | 0 (0.0×) | 1000 (1.3×) | 0 | 0 | 1600 | 20% |"),
        "{md}"
    );
    assert!(
        md.contains("| IP forward | 453 | 463 | 101 | 292 | 757 |"),
        "{md}"
    );
    assert!(
        md.contains("forwards 1.50× the kernel's 64-byte NDR; the target (at least 1.5×) is held."),
        "{md}"
    );
    assert!(
        md.contains(
            "fwd-xdp: at saturation its steps account for 95% of its cycles per packet (within 10%)."
        ),
        "{md}"
    );
    assert!(
        md.contains("Left out: testpmd: dpdk-testpmd is not installed."),
        "{md}"
    );
    assert!(
        !md.contains("| testpmd |"),
        "a DUT left out has no row: {md}"
    );
    assert!(
        !md.contains("## The batch size"),
        "no batch points, no section: {md}"
    );
    // The batch-size series stays out of Table I and has its own table.
    for (b, ndr) in [(1, 100_000), (32, 250_000)] {
        let mut p = point(
            "fwd-xdp",
            ndr,
            Some(serde_json::json!({"mean_batch": b as f64, "steps_total": 900.0})),
        );
        p.fwd_batch = Some(b);
        points.write(&format!("batch-{b}"), &p, None).unwrap();
    }
    let md = std::fs::read_to_string(report::write(&out, "test lab").unwrap()).unwrap();
    assert_eq!(md.matches("| fwd-xdp | 0.300 | 1.50× |").count(), 1, "{md}");
    assert!(md.contains("| 1 | 0.100 | - | 1.0 | 900 | - | - |"), "{md}");
    // So does the poll series.
    let mut p = point("fwd-xdp", 50_000, None);
    p.fwd_poll = Some("rate:10000".into());
    points.write("poll-rate-10000", &p, None).unwrap();
    let md = std::fs::read_to_string(report::write(&out, "test lab").unwrap()).unwrap();
    assert!(md.contains("## The poll rate"), "{md}");
    assert!(md.contains("| rate:10000 | 0.050 | - |"), "{md}");
    assert_eq!(md.matches("| fwd-xdp | 0.300 | 1.50× |").count(), 1, "{md}");
    assert!(
        md.contains("From 1 to 32 the NDR goes from 0.100 to 0.250 Mpps (2.50×)."),
        "{md}"
    );
}

#[test]
fn the_default_study_measures_every_dut_the_lab_builds_with_their_parameters_kept() {
    let o = ForwardingStudyOptions::new("/nowhere".into());
    assert_eq!(o.duts, Dut::ALL);
    assert!(o.duts.contains(&Dut::EMU_XDP) && !o.duts.contains(&Dut::EXTERNAL));
    assert_eq!(o.sizes, rfc2544::FRAME_SIZES);
    let p = o.parameters();
    assert_eq!(p["--sizes"], "64,128,256,512,1024,1280,1518");
    assert_eq!(p["--trial"], "1s");
    assert_eq!(p["--batches"], "1,4,16,64");
    assert_eq!(p["--polls"], "busy,block,rate:100000,rate:10000");
    let r = o.rfc2544(Dut::FWD_XDP);
    assert!(!r.loss_sweep && r.b2b_repeats == 0 && r.latency_trials == 1);
    assert!(r.check_measurement().is_ok());
}
