//! `limits cfn-template` through the binary: the reference's verified template
//! for Example 2 byte for byte, `burst` carried, invalid manifests refused.

mod common;

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = common::zae_limiter()
        .args(args)
        .current_dir(root())
        .output()
        .expect("run zae-limiter");
    common::outcome(out)
}

/// The reference's verified output for Example 2 with `--full` (stack `prod-stack`),
/// including the trailing blank line.
const EXAMPLE_2_FULL: &str = "\
AWSTemplateFormatVersion: '2010-09-09'
Description: Declarative limits for namespace 'prod'
Resources:
  TenantLimits:
    Type: Custom::ZaeLimiterLimits
    Properties:
      ServiceToken:
        Fn::ImportValue: prod-stack-ProvisionerArn
      TableName: prod-stack
      Namespace: prod
      FullApply: true
      Resources:
        gpt-4:
          Limits:
            rpm:
              Capacity: 1000
              Schedule:
              - Cron: '* 9-17 * * MON-FRI'
                Tz: America/New_York
                Scale: 0.5
              - Cron: '* * * * SAT,SUN'
                Tz: America/New_York
                Capacity: 2000
                RefillAmount: 2000
                RefillPeriodSeconds: 60
            rpd:
              Capacity: 10000
              ResetSchedule:
              - Cron: 0 0 * * *
                Tz: America/New_York
      Entities:
        team-a:
          Resources:
            gpt-4:
              Limits:
                session:
                  Capacity: 500
                  ResetAfterSeconds: 18000
                  Soft: true
                monthly:
                  Capacity: 1000000
                  Schedule:
                  - Cron: '* * * 12 *'
                    Scale: 2
                  ResetSchedule:
                  - Cron: 0 0 1 * *
              Cascade: false

";

#[test]
fn example_2_matches_the_reference_byte_for_byte() {
    let (code, out, err) = template(
        "prod-stack",
        "fixtures/manifests/valid/reference-example-2.yaml",
        &["--full"],
    );
    assert_eq!(code, 0, "{err}");
    similar_asserts(EXAMPLE_2_FULL, &out);
}

#[test]
fn without_full_there_is_no_full_apply_property() {
    let (code, out, err) = template(
        "prod-stack",
        "fixtures/manifests/valid/reference-example-2.yaml",
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, EXAMPLE_2_FULL.replace("      FullApply: true\n", ""));
}

/// `limits cfn-template -n STACK -f FILE EXTRA…`.
fn template(stack: &str, file: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["limits", "cfn-template", "-n", stack, "-f", file];
    args.extend_from_slice(extra);
    run(&args)
}

/// [`template`] (stack `s`) of the manifest `text`, written to `name` in a
/// fresh directory.
fn template_of_text(name: &str, text: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = common::write_arg(dir.path(), name, text);
    template("s", &file, &[])
}

#[test]
fn burst_is_carried_and_flags_are_kept() {
    let (code, out, err) = template_of_text(
        "m.yaml",
        "namespace: default
system:
  on_unavailable: allow
  limits:
    rpm:
      capacity: 1000
resources:
  claude-3:
    disabled: false
    cascade: true
    limits:
      rpm:
        burst: 200
        capacity: 100
        refill_amount: 100
        refill_period: 60
entities:
  api-key-123:
    resources:
      gpt-4:
        disabled: bypass
  user-premium:
    resources:
      _default_:
        limits:
          rph:
            capacity: 5000
            refill_period: 3600
",
    );
    assert_eq!(code, 0, "{err}");
    let expected_tail = "      Namespace: default
      System:
        OnUnavailable: allow
        Limits:
          rpm:
            Capacity: 1000
      Resources:
        claude-3:
          Limits:
            rpm:
              Capacity: 200
              RefillAmount: 100
          Disabled: false
          Cascade: true
      Entities:
        api-key-123:
          Resources:
            gpt-4:
              Limits: {}
              Disabled: bypass
        user-premium:
          Resources:
            _default_:
              Limits:
                rph:
                  Capacity: 5000
                  RefillPeriod: 3600

";
    assert!(out.ends_with(expected_tail), "{out}");
}

#[test]
fn an_invalid_manifest_gives_located_errors_and_no_template() {
    let (code, out, err) = template_of_text(
        "bad.yaml",
        "namespace: default
resources:
  gpt-4:
    limits:
      rpm:
        capacity: 100
        schedule:
          - cron: '* 25 * * *'
            scale: 2
",
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "", "no template on stdout");
    assert!(err.contains("bad.yaml:8:"), "located error expected: {err}");
    let (code, out, err) = template("s", "/nonexistent/x.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
}

#[test]
fn limits_the_reference_provisioner_cannot_express_are_refused() {
    let (code, out, err) = template("s", "fixtures/manifests/valid/every-kind.yaml", &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "", "no template on stdout");
    assert!(err.contains("limits apply"), "{err}");
    assert!(err.contains("limit 'in_flight'"), "{err}");
    // A bucket-only manifest still gets its template.
    let (code, out, err) = template("s", "fixtures/manifests/valid/quickstart.yaml", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Custom::ZaeLimiterLimits"));
}

/// assert_eq with a readable line diff.
fn similar_asserts(expected: &str, actual: &str) {
    if expected != actual {
        let diff = similar::TextDiff::from_lines(expected, actual);
        panic!(
            "output differs from the reference:\n{}",
            diff.unified_diff().header("expected", "actual")
        );
    }
}
