# scripts/redmine-seed.rb - seed data for the Redmine integration tests.
#
# Run by scripts/redmine-up.sh through `rails runner` (as www-data, RAILS_ENV=production);
# not meant to be run by hand. Idempotent find-or-create: running it again on a seeded DB
# changes nothing and prints the same values. It prints KEY=value lines only (stdout);
# values with characters outside [A-Za-z0-9_.,:/@+=-] are single-quoted so that the
# output stays eval-able by a POSIX shell. tests/redmine/README.md documents every key.
#
# Changing this file changes REDMINE_SEED_SHA, so redmine-up.sh rebuilds the seeded
# snapshot from the DB as the package left it (ids then start again from 1).

ActiveRecord::Base.logger = nil
$stdout.sync = true

ctx = ActiveRecord::Base.connection.migration_context
if ctx.needs_migration?
  warn 'seed: running db migrations'
  ctx.migrate
  ActiveRecord::Base.connection.schema_cache.clear!
  ActiveRecord::Base.descendants.each(&:reset_column_information)
end
if Redmine::DefaultData::Loader.no_data?
  warn 'seed: loading default data (en)'
  Redmine::DefaultData::Loader.load('en')
end

ADMIN_PASSWORD = ENV.fetch('REDMINE_ADMIN_PASSWORD', 'redmine-admin-pw')
BOT_PASSWORD   = ENV.fetch('REDMINE_BOT_PASSWORD', 'redmine-bot-pw')

# The permissions of the bot's role "Bot", and nothing more. This is the exact list that
# docs/redmine.md documents for a real deployment (names as in Administration > Roles):
#   :view_issues      "View Issues"       - list/show issues, use public saved queries, read journals
#   :add_issue_notes  "Add notes"         - claim notes and the REPORT note (a PUT with only "notes")
#   :edit_issues      "Edit issues"       - change status_id and assigned_to_id in the same PUT; also
#                                           what lets the bot POST /uploads.json and attach the file
#                                           (uploads) to the issue, and what makes Redmine honour
#                                           lock_version for this user
# plus role.assignable = true ("Issues can be assigned to this role"), without which
# assigned_to_id = bot is refused with 422 "Assignee is invalid".
# Not granted on purpose: add_issues, delete_issues, manage_subtasks, view_private_notes,
# set_notes_private, save_queries, manage_public_queries, any project/admin permission.
BOT_PERMISSIONS = [:view_issues, :add_issue_notes, :edit_issues]

# Workflow of role Bot (same for every tracker). Everything else is refused, e.g.
# In Progress -> Closed (the deliberate "forbidden" transition the tests use), New -> Resolved,
# anything -> New, Feedback/Resolved/Closed -> anything.
BOT_TRANSITIONS = [['New', 'In Progress'], ['In Progress', 'Resolved'], ['In Progress', 'Feedback']]
FORBIDDEN_TRANSITION = ['In Progress', 'Closed']

def shq(v)
  v = v.to_s
  v =~ /\A[A-Za-z0-9_.,:\/@+=-]*\z/ ? v : "'" + v.gsub("'", %q('\\\\'')) + "'"
end

out = []
emit = lambda {|k, v| out << "#{k}=#{shq(v)}"}

ActiveRecord::Base.transaction do
  Setting.rest_api_enabled = '1'

  admin = User.find_by_login!('admin')
  unless admin.check_password?(ADMIN_PASSWORD)
    admin.password = admin.password_confirmation = ADMIN_PASSWORD
  end
  admin.must_change_passwd = false
  admin.save!
  admin_key = admin.api_key            # creates the 'api' token on first call

  bot = User.find_by_login('bot') || User.new(:language => 'en')
  bot.login = 'bot'
  bot.firstname = 'CI'
  bot.lastname = 'Bot'
  bot.mail = 'bot@example.com'
  bot.admin = false
  bot.status = User::STATUS_ACTIVE
  if bot.new_record? || !bot.check_password?(BOT_PASSWORD)
    bot.password = bot.password_confirmation = BOT_PASSWORD
  end
  bot.must_change_passwd = false
  bot.save!
  bot_key = bot.api_key

  role = Role.find_by_name('Bot') || Role.new(:name => 'Bot')
  role.assignable = true
  role.issues_visibility = 'all'
  role.users_visibility = 'members_of_visible_projects'
  role.permissions = BOT_PERMISSIONS
  role.save!

  trackers = Tracker.sorted.to_a
  st = IssueStatus.all.index_by(&:name)
  pr = IssuePriority.all.index_by(&:name)
  tr = trackers.index_by(&:name)

  WorkflowTransition.where(:role_id => role.id).delete_all
  trackers.each do |t|
    BOT_TRANSITIONS.each do |from, to|
      WorkflowTransition.create!(:role_id => role.id, :tracker_id => t.id,
                                 :old_status_id => st.fetch(from).id, :new_status_id => st.fetch(to).id,
                                 :author => false, :assignee => false)
    end
  end

  cf = IssueCustomField.find_by_name('Class') || IssueCustomField.new(:name => 'Class')
  cf.field_format = 'string'   # free text, so that an unknown class ("bogus") can be stored
  cf.is_for_all   = true
  cf.is_filter    = true       # without it ?cf_<id>=... and saved-query cf filters are ignored
  cf.searchable   = true
  cf.visible      = true
  cf.is_required  = false
  cf.tracker_ids  = trackers.map(&:id)
  cf.save!

  # [redmine.writeback] result_fields (tests/redmine.rs): a `finish` result's key is written
  # to this field; for every project and tracker, editable by the bot's role.
  rf = IssueCustomField.find_by_name('Result category') || IssueCustomField.new(:name => 'Result category')
  rf.field_format = 'string'
  rf.is_for_all   = true
  rf.visible      = true
  rf.is_required  = false
  rf.tracker_ids  = trackers.map(&:id)
  rf.save!

  projects = {}
  [['mopac', 'Redmine integration-test project'],
   ['sandbox', 'Second project: its New issue must never be in the mopac scope']].each do |ident, desc|
    p = Project.find_by_identifier(ident) || Project.new(:name => ident, :identifier => ident, :is_public => false)
    p.description = desc if p.new_record?
    p.tracker_ids = trackers.map(&:id)
    p.enabled_module_names = (p.enabled_module_names | %w(issue_tracking))
    p.save!
    m = Member.where(:project_id => p.id, :user_id => bot.id).first || Member.new(:project => p, :principal => bot)
    m.role_ids = [role.id] if m.new_record? || m.role_ids != [role.id]
    m.save!
    projects[ident] = p
  end
  project = projects['mopac']

  # key, project, subject, tracker, status, priority, Class, assignee, admin notes (journals)
  specs = [
    ['STUDY',   'mopac', 'Study the mopac data model',          'Feature', 'New', 'Normal',    'study',   nil,
     ['Start with the issues table.', 'Also look at journals and custom values.']],
    ['READ',    'mopac', 'Read the upstream API docs',          'Support', 'New', 'Low',       'read',    nil,
     ['Focus on the REST issues endpoint.']],
    ['CODE',    'mopac', 'Implement issue sync',                'Feature', 'New', 'High',      'code',    nil, []],
    ['REVIEW',  'mopac', 'Review the architecture proposal',    'Feature', 'New', 'Normal',    'review',  nil,
     ["The proposal is attached to the wiki.\nPlease be critical."]],
    ['PRIMARY', 'mopac', 'Primary research: Redmine workflows', 'Bug',     'New', 'Urgent',    'primary', nil, []],
    ['NOCLASS', 'mopac', 'Triage an issue without a class',     'Support', 'New', 'Low',       '',        nil, []],
    ['BOGUS',   'mopac', 'Issue with an unknown class',         'Feature', 'New', 'Normal',    'bogus',   nil, []],
    ['CODE2',   'mopac', 'Fix pagination off-by-one',           'Bug',     'New', 'Immediate', 'code',    nil,
     ['Reproduced with limit=25, offset=25.']],
    ['STUDY2',  'mopac', 'Study the claim protocol',            'Feature', 'New', 'High',      'study',   nil, []],
    ['READ2',   'mopac', 'Read the SQLite locking docs',        'Support', 'New', 'Normal',    'read',    nil, []],
    ['REVIEW2', 'mopac', 'Review the write-back format',        'Feature', 'New', 'Low',       'review',  nil, []],
    ['CODE3',   'mopac', 'Add retry with backoff',              'Feature', 'New', 'Normal',    'code',    nil, []],
    ['INPROGRESS', 'mopac', 'Already being worked on',          'Feature', 'In Progress', 'High', 'code', bot,
     ['Claimed by a previous run.']],
    ['RESOLVED', 'mopac', 'Resolved last week',                 'Bug',     'Resolved', 'Normal',  'code',   nil, []],
    ['FEEDBACK', 'mopac', 'Waiting for feedback',               'Feature', 'Feedback', 'Normal',  'review', nil, []],
    ['CLOSED',  'mopac', 'Closed: nothing to do',               'Bug',     'Closed',   'Urgent',  'read',   nil, []],
    ['OTHER',   'sandbox', 'New issue in another project',      'Feature', 'New', 'Immediate', 'code',    nil, []],
  ]
  ids = {}
  journaled = []
  specs.each do |key, pident, subject, tname, sname, pname, klass, assignee, notes|
    p = projects.fetch(pident)
    issue = Issue.where(:project_id => p.id, :subject => subject).first
    unless issue
      issue = Issue.new(:project => p, :author => admin, :subject => subject)
      issue.tracker     = tr.fetch(tname)
      issue.status      = st.fetch(sname)
      issue.priority    = pr.fetch(pname)
      issue.assigned_to = assignee
      issue.description = "Seeded issue #{key}: #{subject}"
      issue.custom_field_values = {cf.id.to_s => klass}
      issue.save!
      notes.each do |n|
        j = Issue.find(issue.id)   # init_journal memoizes its journal: one fresh object per note
        j.init_journal(admin, n)
        j.save!
      end
    end
    ids[key] = issue.id
    journaled << issue.id if notes.any?
  end

  sort = [['priority', 'desc'], ['id', 'asc']]
  cols = [:tracker, :status, :priority, :subject, :assigned_to, :updated_on, :"cf_#{cf.id}"]
  new_id = st.fetch('New').id.to_s
  # Global public query: GET /issues.json?query_id=N (the project filter is inside the query).
  gq = IssueQuery.where(:name => 'mopac: New', :project_id => nil).first || IssueQuery.new(:name => 'mopac: New')
  gq.user = admin
  gq.visibility = Query::VISIBILITY_PUBLIC
  gq.filters = {'status_id' => {:operator => '=', :values => [new_id]},
                'project_id' => {:operator => '=', :values => [project.id.to_s]}}
  gq.sort_criteria = sort
  gq.column_names = cols
  gq.save!
  # Project public query (stored ON mopac): needs project context,
  # /projects/mopac/issues.json?query_id=N or /issues.json?project_id=mopac&query_id=N;
  # plain /issues.json?query_id=N answers 404.
  pq = IssueQuery.where(:name => 'New code tasks', :project_id => project.id).first ||
       IssueQuery.new(:name => 'New code tasks', :project => project)
  pq.user = admin
  pq.visibility = Query::VISIBILITY_PUBLIC
  pq.filters = {'status_id' => {:operator => '=', :values => [new_id]},
                "cf_#{cf.id}" => {:operator => '=', :values => ['code']}}
  pq.sort_criteria = sort
  pq.column_names = cols
  pq.save!
  # Private query of the admin: exists, but the bot may not use it.
  xq = IssueQuery.where(:name => 'admin only', :project_id => nil).first || IssueQuery.new(:name => 'admin only')
  xq.user = admin
  xq.visibility = Query::VISIBILITY_PRIVATE
  xq.filters = {'status_id' => {:operator => 'o', :values => ['']}}
  xq.sort_criteria = sort
  xq.save!

  # Expected result order of the saved queries, computed from the rows themselves and not
  # through Query (whose in-process result once disagreed with the REST answer on a fresh
  # install): New issues of mopac by priority position descending, then id ascending.
  expected = lambda do |rel|
    rel.to_a.sort_by {|i| [-i.priority.position, i.id]}.map(&:id)
  end
  new_of_mopac = Issue.where(:project_id => project.id, :status_id => st.fetch('New').id)
  gq_order = expected.call(new_of_mopac)
  pq_order = expected.call(new_of_mopac.select {|i| i.custom_field_value(cf) == 'code'})

  by_status = Hash.new {|h, k| h[k] = []}
  Issue.where(:id => ids.values).order(:id).each {|i| by_status[[i.project_id, i.status.name]] << i.id}
  mopac_new = by_status[[project.id, 'New']]
  mopac_not_new = ids.values.sort - mopac_new - [ids['OTHER']]

  emit['REDMINE_ADMIN_LOGIN', 'admin']
  emit['REDMINE_ADMIN_PASSWORD', ADMIN_PASSWORD]
  emit['REDMINE_ADMIN_USER_ID', admin.id]
  emit['REDMINE_ADMIN_API_KEY', admin_key]
  emit['REDMINE_BOT_LOGIN', 'bot']
  emit['REDMINE_BOT_PASSWORD', BOT_PASSWORD]
  emit['REDMINE_BOT_USER_ID', bot.id]
  emit['REDMINE_BOT_NAME', bot.name]
  emit['REDMINE_BOT_API_KEY', bot_key]
  emit['REDMINE_BOT_ROLE', role.name]
  emit['REDMINE_BOT_ROLE_ID', role.id]
  emit['REDMINE_BOT_PERMISSIONS', BOT_PERMISSIONS.join(',')]
  emit['REDMINE_BOT_TRANSITIONS', BOT_TRANSITIONS.map {|a, b| "#{st[a].id}:#{st[b].id}"}.join(',')]
  emit['REDMINE_BOT_TRANSITION_NAMES', BOT_TRANSITIONS.map {|a, b| "#{a}>#{b}"}.join(',')]
  emit['REDMINE_FORBIDDEN_TRANSITION', FORBIDDEN_TRANSITION.map {|s| st[s].id}.join(':')]
  emit['REDMINE_PROJECT', project.identifier]
  emit['REDMINE_PROJECT_ID', project.id]
  emit['REDMINE_OTHER_PROJECT', projects['sandbox'].identifier]
  emit['REDMINE_OTHER_PROJECT_ID', projects['sandbox'].id]
  emit['REDMINE_CLASS_FIELD', cf.name]
  emit['REDMINE_CLASS_CF_ID', cf.id]
  emit['REDMINE_RESULT_CF_ID', rf.id]
  emit['REDMINE_QUERY_ID', gq.id]
  emit['REDMINE_QUERY_ORDER', gq_order.join(',')]
  emit['REDMINE_PROJECT_QUERY_ID', pq.id]
  emit['REDMINE_PROJECT_QUERY_ORDER', pq_order.join(',')]
  emit['REDMINE_PRIVATE_QUERY_ID', xq.id]
  emit['REDMINE_NEW_ISSUE_IDS', mopac_new.join(',')]
  emit['REDMINE_NOT_NEW_ISSUE_IDS', mopac_not_new.join(',')]
  emit['REDMINE_JOURNALED_ISSUE_IDS', journaled.sort.join(',')]
  ids.each {|k, v| emit["REDMINE_ISSUE_#{k}_ID", v]}
  IssueStatus.sorted.each {|s| emit["REDMINE_STATUS_#{s.name.upcase.gsub(/[^A-Z0-9]+/, '_')}_ID", s.id]}
  emit['REDMINE_STATUS_IDS', IssueStatus.sorted.map {|s| "#{s.name.tr(' ', '_')}:#{s.id}"}.join(',')]
  emit['REDMINE_CLAIM_STATUS', 'In Progress']
  emit['REDMINE_DONE_STATUS', 'Resolved']
  emit['REDMINE_FAILED_STATUS', 'Feedback']
  emit['REDMINE_TRACKER_IDS', trackers.map {|t| "#{t.name}:#{t.id}"}.join(',')]
  emit['REDMINE_PRIORITY_IDS', IssuePriority.sorted.map {|p| "#{p.name}:#{p.id}"}.join(',')]
  emit['REDMINE_ATTACHMENT_MAX_KB', Setting.attachment_max_size]
end
puts out
