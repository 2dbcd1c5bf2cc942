//! Verdicts as JUnit XML, which GitLab, Jenkins and GitHub's test reporters read: one test
//! case per assertion (and run), a failed one with a `<failure>`, an inconclusive one
//! `<skipped>`, the interval in the message.

use latlab_stats::gate::Verdict;

use super::AssertionVerdict;

/// The JUnit XML text of `verdicts`, in one test suite named `suite` (`latlab gen`).
pub fn junit_xml(suite: &str, verdicts: &[AssertionVerdict]) -> String {
    let count = |v: Verdict| verdicts.iter().filter(|a| a.verdict == v).count();
    let (tests, failures, skipped) = (
        verdicts.len(),
        count(Verdict::Fail),
        count(Verdict::Inconclusive),
    );
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuites name=\"latlab\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n"
    ));
    xml.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n",
        escape(suite)
    ));
    for v in verdicts {
        let class = match &v.run {
            Some(run) => format!("{suite}.{run}"),
            None => suite.to_string(),
        };
        xml.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(&class),
            escape(&v.assertion)
        ));
        let message = escape(&v.message);
        match v.verdict {
            Verdict::Pass => xml.push_str(&format!(">\n      <system-out>{message}</system-out>\n    </testcase>\n")),
            Verdict::Fail => xml.push_str(&format!(
                ">\n      <failure type=\"assertion\" message=\"{message}\">{message}</failure>\n    </testcase>\n"
            )),
            Verdict::Inconclusive => xml.push_str(&format!(
                ">\n      <skipped message=\"inconclusive: {message}\"/>\n    </testcase>\n"
            )),
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// `text` made safe inside an XML attribute or element: the five markup characters as
/// entities, and the characters XML 1.0 does not allow at all (control characters other than
/// tab, line feed and carriage return) left out. Tab, line feed and carriage return are
/// written as character references so that attributes keep them.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(assertion: &str, verdict: Verdict, message: &str) -> AssertionVerdict {
        AssertionVerdict {
            assertion: assertion.into(),
            run: None,
            verdict,
            unit: "ns".into(),
            estimate: None,
            low: None,
            high: None,
            samples: 0,
            needed_samples: None,
            needed_duration_s: None,
            message: message.into(),
        }
    }

    #[test]
    fn markup_and_forbidden_characters_never_reach_the_file() {
        assert_eq!(
            escape("p99<=2ms & \"x\" 'y' >"),
            "p99&lt;=2ms &amp; &quot;x&quot; &apos;y&apos; &gt;"
        );
        assert_eq!(escape("a\u{1}b\u{1b}c\td\n"), "abc&#9;d&#10;");
        assert_eq!(escape("12.35 µs"), "12.35 µs");
    }

    #[test]
    fn each_verdict_is_a_test_case_failure_and_skipped_for_fail_and_inconclusive() {
        let xml = junit_xml(
            "latlab gen",
            &[
                verdict("p99<=2ms", Verdict::Pass, "p99 1.000 ms [0.9 ms, 1.1 ms]"),
                verdict("p99.9<1ms", Verdict::Fail, "p99.9 3.000 ms [2 ms, 4 ms]"),
                verdict(
                    "loss<=0.1%",
                    Verdict::Inconclusive,
                    "loss 0.120% [0.07%, 0.21%]",
                ),
            ],
        );
        let golden = concat!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
            "<testsuites name=\"latlab\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\">\n",
            "  <testsuite name=\"latlab gen\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\">\n",
            "    <testcase classname=\"latlab gen\" name=\"p99&lt;=2ms\">\n",
            "      <system-out>p99 1.000 ms [0.9 ms, 1.1 ms]</system-out>\n",
            "    </testcase>\n",
            "    <testcase classname=\"latlab gen\" name=\"p99.9&lt;1ms\">\n",
            "      <failure type=\"assertion\" message=\"p99.9 3.000 ms [2 ms, 4 ms]\">p99.9 3.000 ms [2 ms, 4 ms]</failure>\n",
            "    </testcase>\n",
            "    <testcase classname=\"latlab gen\" name=\"loss&lt;=0.1%\">\n",
            "      <skipped message=\"inconclusive: loss 0.120% [0.07%, 0.21%]\"/>\n",
            "    </testcase>\n",
            "  </testsuite>\n",
            "</testsuites>\n",
        );
        assert_eq!(xml, golden);
    }
}
