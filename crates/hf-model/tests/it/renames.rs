//! Renames through `renamedFrom`: a create that moves the old item, references that follow, the
//! hint kept in the files and by later replaces, and refusals that name the key concerned.

use hf_model::{
    files, new_problems, validate, Error, Field, FieldKind, Model, Module, Object, QualifiedName,
    ScalarType, Target,
};

fn demo() -> Model {
    files::load_dir(&super::fixtures_dir().join("demo")).unwrap()
}

fn name(object: &str) -> QualifiedName {
    QualifiedName::new("crm", object)
}

fn renamed_field(key: &str, from: &str, field_type: ScalarType) -> Field {
    let kind = FieldKind::Scalar {
        field_type,
        required: false,
        unique: false,
        indexed: false,
        values: Vec::new(),
        default_value: None,
    };
    let mut field = Field::new(key, "Renamed", kind);
    field.renamed_from = Some(from.to_owned());
    field
}

fn rollup_source(model: &Model, object: &str, field: &str) -> (String, Option<String>) {
    match &model.object(&name(object)).unwrap().fields[field].kind {
        FieldKind::Rollup {
            source,
            field: aggregated,
            ..
        } => (source.to_string(), aggregated.clone()),
        other => panic!("not a rollup: {other:?}"),
    }
}

/// Every rename must leave a model without new problems and survive its files.
fn check_consistent(before: &Model, after: &Model) {
    assert_eq!(new_problems(before, after), vec![]);
    let rendered = files::render(after).unwrap();
    let reloaded = files::load(rendered.iter().map(|(p, t)| (p.as_str(), t.as_bytes()))).unwrap();
    assert_eq!(&reloaded, after, "the hints survive the files");
}

#[test]
fn field_rename_moves_the_field_and_keeps_the_hint() {
    let before = demo();
    let mut model = before.clone();
    let change = model
        .create_field(
            &name("opportunity"),
            renamed_field("expected_close", "close_date", ScalarType::Date),
        )
        .unwrap();
    assert_eq!(
        change.describe(),
        "create field crm.opportunity.expected_close"
    );
    let fields = &model.object(&name("opportunity")).unwrap().fields;
    assert!(!fields.contains_key("close_date"));
    assert_eq!(
        fields["expected_close"].renamed_from.as_deref(),
        Some("close_date")
    );
    check_consistent(&before, &model);
    let file = files::render(&model).unwrap()["crm/objects/opportunity.json5"].clone();
    assert!(file.contains("renamedFrom: \"close_date\""), "{file}");

    // A later PUT without the hint keeps it; one with another hint replaces it.
    let mut plain = renamed_field("expected_close", "x", ScalarType::Date);
    plain.renamed_from = None;
    plain.label = "Expected close".into();
    model.replace_field(&name("opportunity"), plain).unwrap();
    let field = &model.object(&name("opportunity")).unwrap().fields["expected_close"];
    assert_eq!(field.label, "Expected close");
    assert_eq!(field.renamed_from.as_deref(), Some("close_date"));
}

#[test]
fn field_rename_retargets_rollups_and_rule_anchors() {
    let before = demo();
    let mut model = before.clone();
    let mut customer = Field::new(
        "customer",
        "Customer",
        FieldKind::Lookup {
            target: name("account"),
            required: true,
            indexed: true,
        },
    );
    customer.renamed_from = Some("account".into());
    model.create_field(&name("opportunity"), customer).unwrap();
    assert_eq!(
        rollup_source(&model, "account", "pipeline_amount"),
        ("crm.opportunity.customer".to_owned(), Some("amount".into()))
    );
    check_consistent(&before, &model);

    // A rule anchored to the field (whose assertion does not mention it) follows too.
    let mut before = before;
    let opportunity = before
        .modules
        .get_mut("crm")
        .unwrap()
        .objects
        .get_mut("opportunity")
        .unwrap();
    let rule = hf_model::Rule {
        assert: "name != ''".into(),
        message: "A dated opportunity needs a name.".into(),
        field: Some("close_date".into()),
    };
    opportunity.rules.insert("dated_needs_name".into(), rule);
    let mut model = before.clone();
    model
        .create_field(
            &name("opportunity"),
            renamed_field("expected_close", "close_date", ScalarType::Date),
        )
        .unwrap();
    let rules = &model.object(&name("opportunity")).unwrap().rules;
    assert_eq!(
        rules["dated_needs_name"].field.as_deref(),
        Some("expected_close")
    );
    check_consistent(&before, &model);
}

#[test]
fn field_rename_is_refused_while_an_expression_mentions_the_old_key() {
    let model = demo();
    let refused =
        |object: &str, field: Field| match model.clone().create_field(&name(object), field) {
            Err(Error::InUse { target, referrer }) => (*target, *referrer),
            other => panic!("expected InUse, got {other:?}"),
        };
    // `amount` is used by the formula `weighted_amount` and by rules.
    let (target, referrer) = refused(
        "opportunity",
        renamed_field("value", "amount", ScalarType::Decimal),
    );
    assert_eq!(target, Target::field(&name("opportunity"), "amount"));
    assert_eq!(
        referrer,
        Target::field(&name("opportunity"), "weighted_amount")
    );
    // `stage` is used by the filter of a rollup over opportunities.
    let (_, referrer) = refused(
        "opportunity",
        renamed_field("phase", "stage", ScalarType::Text),
    );
    assert_eq!(referrer, Target::field(&name("account"), "won_amount"));
    // `party.name` is used by party's rule `name != ''`.
    let (_, referrer) = refused(
        "party",
        renamed_field("full_name", "name", ScalarType::Text),
    );
    assert_eq!(referrer, Target::rule(&name("party"), "name_not_blank"));
}

#[test]
fn field_rename_refusals_name_the_key() {
    let mut model = demo();
    assert!(matches!(
        model.create_field(&name("opportunity"), renamed_field("x", "nothing", ScalarType::Text)),
        Err(Error::FieldNotFound { field, .. }) if field == "nothing"
    ));
    assert!(matches!(
        model.create_field(&name("opportunity"), renamed_field("name", "stage", ScalarType::Text)),
        Err(Error::AlreadyExists { target }) if target == Target::field(&name("opportunity"), "name")
    ));
    assert!(matches!(
        model.create_field(&name("opportunity"), renamed_field("x", "Bad Key", ScalarType::Text)),
        Err(Error::InvalidKey { key, .. }) if key == "Bad Key"
    ));
}

#[test]
fn object_rename_moves_fields_and_retargets_references() {
    let before = demo();
    let mut model = before.clone();
    let mut deal = Object::new("deal", "Deal");
    deal.renamed_from = Some("opportunity".into());
    let change = model.create_object("crm", deal).unwrap();
    assert_eq!(change.file(), "crm/objects/deal.json5");
    assert!(model.object(&name("opportunity")).is_none());
    let deal = model.object(&name("deal")).unwrap();
    assert!(deal.fields.contains_key("amount"), "the fields move");
    assert_eq!(deal.renamed_from.as_deref(), Some("opportunity"));
    assert_eq!(
        rollup_source(&model, "account", "won_amount").0,
        "crm.deal.account"
    );
    check_consistent(&before, &model);
    let changes = files::render_changes(&before, &model).unwrap();
    let paths: Vec<(&str, bool)> = changes
        .iter()
        .map(|c| (c.path.as_str(), c.content.is_some()))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("crm/objects/account.json5", true),
            ("crm/objects/deal.json5", true),
            ("crm/objects/opportunity.json5", false),
        ]
    );

    // An abstract parent: its subtypes' `extends` follow.
    let mut model = before.clone();
    let mut person = Object::new("person", "Person");
    person.is_abstract = true;
    person.renamed_from = Some("party".into());
    model.create_object("crm", person).unwrap();
    assert_eq!(
        model.object(&name("account")).unwrap().extends,
        Some(name("person"))
    );
    check_consistent(&before, &model);

    // The hint stays through a replace that gives none.
    model
        .replace_object("crm", Object::new("person", "Someone"))
        .unwrap();
    let person = model.object(&name("person")).unwrap();
    assert_eq!(person.renamed_from.as_deref(), Some("party"));
    assert!(person.fields.contains_key("email"));

    let mut missing = Object::new("x", "X");
    missing.renamed_from = Some("nothing".into());
    assert!(matches!(
        model.create_object("crm", missing),
        Err(Error::ObjectNotFound { object }) if object == name("nothing")
    ));
}

#[test]
fn module_rename_moves_everything_and_retargets_references() {
    let before = demo();
    let mut model = before.clone();
    let mut sales = Module::new("sales", "Sales");
    sales.renamed_from = Some("crm".into());
    model.create_module(sales).unwrap();
    assert!(model.module("crm").is_none());
    let sales = model.module("sales").unwrap();
    assert_eq!(
        sales.objects.len(),
        before.module("crm").unwrap().objects.len()
    );
    assert_eq!(
        sales.screens.len(),
        before.module("crm").unwrap().screens.len()
    );
    let account = model
        .object(&QualifiedName::new("sales", "account"))
        .unwrap();
    assert_eq!(account.extends, Some(QualifiedName::new("sales", "party")));
    check_consistent(&before, &model);
    let module_file = files::render(&model).unwrap()["sales/module.json5"].clone();
    assert!(
        module_file.contains("renamedFrom: \"crm\""),
        "{module_file}"
    );

    let mut missing = Module::new("erp", "ERP");
    missing.renamed_from = Some("nothing".into());
    assert!(matches!(
        model.create_module(missing),
        Err(Error::ModuleNotFound { module }) if module == "nothing"
    ));
}

#[test]
fn invalid_hints_in_files_are_diagnostics() {
    let mut model = demo();
    let object = model
        .modules
        .get_mut("crm")
        .unwrap()
        .objects
        .get_mut("opportunity")
        .unwrap();
    object.renamed_from = Some("opportunity".into());
    object.fields.get_mut("stage").unwrap().renamed_from = Some("Not A Key".into());
    let problems: Vec<(String, &str, Option<&str>)> = validate(&model)
        .iter()
        .map(|d| (d.target.to_string(), d.code.name(), d.property))
        .collect();
    assert_eq!(
        problems,
        vec![
            (
                "crm.opportunity".to_owned(),
                "INVALID_RENAME_HINT",
                Some("renamedFrom")
            ),
            (
                "crm.opportunity.stage".to_owned(),
                "INVALID_RENAME_HINT",
                Some("renamedFrom")
            ),
        ]
    );
}
