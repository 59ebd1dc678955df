//! One strategy spec for both shells: every parameter checked once, errors naming the
//! parameter for each shell to word.

use ordo::{
    Error, OneDeviceSchedule, Parameter, Pipeline, PipelineSchedule, Schedule, StrategyKind,
    StrategyParams, StrategySpec, TaskOrder,
};

/// The parameter a refusal names, and its message as the facade words it (Python's words).
fn refused(kind: StrategyKind, params: StrategyParams) -> (Parameter, String) {
    match StrategySpec::new(kind, &params) {
        Err(Error::Parameter(error)) => (error.parameter, error.to_string()),
        other => panic!("expected a parameter error, got {other:?}"),
    }
}

fn pipeline_params(stages: usize, micro_batches: usize) -> StrategyParams {
    StrategyParams {
        stages: Some(stages),
        micro_batches: Some(micro_batches),
        ..StrategyParams::default()
    }
}

#[test]
fn each_bad_parameter_is_refused_naming_it() {
    let ooo = Some(Schedule::OneDevice(OneDeviceSchedule::Ooo));
    let gpipe = Some(Schedule::Pipeline(PipelineSchedule::Gpipe));
    let placed = || StrategyKind::Placed("m-etf".parse().unwrap());
    let cases = [
        (
            StrategyKind::Pipeline,
            pipeline_params(1, 4),
            Parameter::Stages,
            "stages=1: a pipeline needs at least 2 stages",
        ),
        (
            StrategyKind::Pipeline,
            pipeline_params(2, 0),
            Parameter::MicroBatches,
            "micro_batches must be at least 1",
        ),
        (
            StrategyKind::Pipeline,
            StrategyParams { schedule: ooo, ..pipeline_params(2, 4) },
            Parameter::Stages,
            "stages takes schedule gpipe",
        ),
        (
            StrategyKind::Pipeline,
            StrategyParams { micro_batches: Some(4), ..StrategyParams::default() },
            Parameter::Stages,
            "the strategy needs stages",
        ),
        (
            StrategyKind::DataParallel,
            StrategyParams { replicas: Some(0), ..StrategyParams::default() },
            Parameter::Replicas,
            "replicas must be at least 1",
        ),
        (
            StrategyKind::DataParallel,
            StrategyParams { replicas: Some(2), schedule: gpipe, ..StrategyParams::default() },
            Parameter::Schedule,
            "schedule=gpipe needs stages S",
        ),
        (
            StrategyKind::DataParallel,
            StrategyParams { replicas: Some(2), steps: Some(0), ..StrategyParams::default() },
            Parameter::Steps,
            "steps=0: a plan makes at least one step",
        ),
        (
            StrategyKind::DataParallel,
            StrategyParams { replicas: Some(2), modulo: Some(2), ..StrategyParams::default() },
            Parameter::Modulo,
            "modulo applies to pipelines only",
        ),
        (
            StrategyKind::OneDevice,
            StrategyParams { schedule: gpipe, ..StrategyParams::default() },
            Parameter::Schedule,
            "schedule=gpipe is a pipeline schedule: give stages S",
        ),
        (
            StrategyKind::OneDevice,
            StrategyParams { defer: Some(2), ..StrategyParams::default() },
            Parameter::Defer,
            "defer needs schedule ooo",
        ),
        (
            StrategyKind::OneDevice,
            StrategyParams {
                schedule: ooo,
                defer: Some(2),
                steps: Some(1),
                ..StrategyParams::default()
            },
            Parameter::Steps,
            "steps=1: deferred work crosses steps",
        ),
        (
            StrategyKind::OneDevice,
            StrategyParams { order: TaskOrder::Model, ..StrategyParams::default() },
            Parameter::Order,
            "order model applies to placed plans",
        ),
        (
            placed(),
            StrategyParams { steps: Some(2), ..StrategyParams::default() },
            Parameter::Steps,
            "steps applies to defer and replicas plans",
        ),
        (
            placed(),
            StrategyParams { schedule: ooo, ..StrategyParams::default() },
            Parameter::Schedule,
            "schedule=ooo applies to one device",
        ),
        (
            StrategyKind::DataParallel,
            StrategyParams { replicas: Some(2), defer: Some(1), ..StrategyParams::default() },
            Parameter::Defer,
            "defer applies to one device's schedule ooo",
        ),
    ];
    for (kind, params, parameter, message) in cases {
        let (got, text) = refused(kind, params);
        assert_eq!(got, parameter, "{text}");
        assert!(text.starts_with(message), "`{text}` does not start with `{message}`");
    }
}

#[test]
fn a_shell_words_the_parameters_its_own_way() {
    let params = StrategyParams {
        schedule: Some(Schedule::Pipeline(PipelineSchedule::ZbH1)),
        ..StrategyParams::default()
    };
    let Err(Error::Parameter(error)) = StrategySpec::new(StrategyKind::OneDevice, &params) else {
        panic!("a pipeline schedule on one device was accepted");
    };
    let flags = error.worded(|parameter, value| {
        let flag = format!("--{}", parameter.name().replace('_', "-"));
        value.map_or(flag.clone(), |value| format!("{flag} {value}"))
    });
    assert_eq!(flags, "--schedule zb-h1 is a pipeline schedule: give --stages S");
    assert_eq!(error.to_string(), "schedule=zb-h1 is a pipeline schedule: give stages S");
}

#[test]
fn names_parse_into_kinds_and_schedules() {
    let mut schedule = None;
    assert_eq!(StrategyKind::from_name("ooo", &mut schedule).unwrap(), StrategyKind::OneDevice);
    assert_eq!(schedule, Some(Schedule::OneDevice(OneDeviceSchedule::Ooo)));
    let mut schedule = Some(Schedule::OneDevice(OneDeviceSchedule::InOrder));
    assert!(StrategyKind::from_name("ooo", &mut schedule).is_err(), "a disagreeing schedule");
    assert!(matches!(
        StrategyKind::from_name("m-sct", &mut None).unwrap(),
        StrategyKind::Placed(_)
    ));
    assert!(StrategyKind::from_name("nonsense", &mut None).is_err());
    for schedule in Schedule::ALL {
        assert_eq!(schedule.name().parse::<Schedule>().unwrap(), schedule);
    }
    let err = "zb-h3".parse::<Schedule>().unwrap_err().to_string();
    assert!(err.contains("schedule `zb-h3`: expected one of inorder, ooo, gpipe"), "{err}");
}

#[test]
fn a_checked_spec_resolves_to_the_strategy_it_names() {
    let params = StrategyParams {
        schedule: Some(Schedule::Pipeline(PipelineSchedule::ZbH2)),
        modulo: Some(2),
        action_overhead_us: 7,
        ..pipeline_params(4, 8)
    };
    let spec = StrategySpec::new(StrategyKind::Pipeline, &params).unwrap();
    let expected =
        Pipeline::new(4, 8, PipelineSchedule::ZbH2).with_modulo(2).with_action_overhead(7);
    assert_eq!(spec, StrategySpec::Pipeline(expected));
    assert_eq!(params.pipeline().unwrap(), expected);
    assert_eq!(spec.devices(), Some(4));
    let dp = StrategyParams { replicas: Some(3), first_k: 2, ..StrategyParams::default() };
    let spec = StrategySpec::new(StrategyKind::DataParallel, &dp).unwrap();
    assert!(matches!(spec, StrategySpec::DataParallel { replicas: 3, first_k: 2, steps: 1, .. }));
    assert_eq!(spec.devices(), Some(1));
}

#[test]
fn data_parallel_parameters_are_refused_elsewhere() {
    let placed = StrategyKind::Placed("m-etf".parse().unwrap());
    let replicas = StrategyParams { replicas: Some(2), ..StrategyParams::default() };
    let (parameter, text) = refused(placed, replicas);
    assert_eq!(parameter, Parameter::Replicas);
    assert_eq!(text, "replicas applies to data-parallel plans only");
    let first_k = StrategyParams { first_k: 1, ..pipeline_params(2, 4) };
    let (parameter, text) = refused(StrategyKind::Pipeline, first_k);
    assert_eq!(parameter, Parameter::FirstK);
    assert_eq!(text, "first_k applies to data-parallel plans only");
    let bucket = StrategyParams { bucket_bytes: 1 << 20, ..StrategyParams::default() };
    assert_eq!(refused(StrategyKind::OneDevice, bucket).0, Parameter::BucketBytes);
}
