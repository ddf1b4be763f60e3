(** * Instances: the symbolic rules are sound at every admissible instance (dims satisfying
    the [where] assumptions, any group lengths, float dtypes for dtype variables): broadcasting,
    the dtype joins and the reduction axes evaluate to kinac's concrete rules. *)
From Coq Require Import List Arith String Bool Lia.
From Kina Require Import Dims Types Rules.
Import ListNotations.

(** ** The concrete broadcast on integer lists. *)
Lemma bcast_dim_self : forall n, bcast_dim n n = Some n.
Proof.
  intro n; unfold bcast_dim; destruct (Nat.eqb_spec n 1); subst; auto.
  rewrite Nat.eqb_refl; auto.
Qed.

Lemma bcast_dim_one_r : forall n, bcast_dim n 1 = Some n.
Proof. intro n; unfold bcast_dim; destruct (Nat.eqb_spec n 1); subst; auto. Qed.

Lemma bcast_rev_nil_r : forall a, bcast_rev a [] = Some a.
Proof. destruct a; auto. Qed.

Lemma bcast_rev_self : forall a, bcast_rev a a = Some a.
Proof. induction a as [|x a IH]; simpl; auto. rewrite bcast_dim_self, IH; auto. Qed.

Lemma bcast_rev_app : forall x y r t u w,
  List.length x = List.length y -> bcast_rev x y = Some r -> bcast_rev t u = Some w ->
  bcast_rev (x ++ t) (y ++ u) = Some (r ++ w).
Proof.
  induction x as [|a x IH]; intros [|b y] r t u w L H1 H2; simpl in *; try discriminate.
  - injection H1 as <-; auto.
  - destruct (bcast_dim a b) eqn:E; [|discriminate].
    destruct (bcast_rev x y) eqn:E2; [|discriminate].
    injection H1 as <-; rewrite (IH y l t u w); auto.
Qed.

Lemma bcast_rev_long_l : forall x y r t,
  List.length y <= List.length x -> bcast_rev x y = Some r -> bcast_rev (x ++ t) y = Some (r ++ t).
Proof.
  induction x as [|a x IH]; intros [|b y] r t L H; simpl in *; try lia.
  - injection H as <-; apply bcast_rev_nil_r.
  - injection H as <-; auto.
  - destruct (bcast_dim a b) eqn:E; [|discriminate].
    destruct (bcast_rev x y) eqn:E2; [|discriminate].
    injection H as <-; rewrite (IH y l t); auto; lia.
Qed.

Lemma bcast_rev_long_r : forall x y r t,
  List.length x <= List.length y -> bcast_rev x y = Some r -> bcast_rev x (y ++ t) = Some (r ++ t).
Proof.
  induction x as [|a x IH]; intros [|b y] r t L H; simpl in *; try lia.
  - injection H as <-; auto.
  - injection H as <-; auto.
  - destruct (bcast_dim a b) eqn:E; [|discriminate].
    destruct (bcast_rev x y) eqn:E2; [|discriminate].
    injection H as <-; rewrite (IH y l t); auto; lia.
Qed.

(** ** Symbolic broadcasting is sound at every admissible valuation. *)
Lemma dim_bcast_sound : forall A r a b c,
  dim_bcast A a b c -> admissible A r ->
  bcast_dim (eval_dim r a) (eval_dim r b) = Some (eval_dim r c).
Proof.
  intros A r a b c H Ad; inversion H; subst; simpl.
  - reflexivity.
  - apply bcast_dim_one_r.
  - rewrite (H0 r Ad); apply bcast_dim_self.
  - rewrite (H0 r Ad); reflexivity.
  - rewrite (H0 r Ad); apply bcast_dim_one_r.
Qed.

Lemma rev_bcast_sound : forall A r a b c,
  rev_bcast A a b c -> admissible A r ->
  bcast_rev (map (eval_dim r) a) (map (eval_dim r) b) = Some (map (eval_dim r) c).
Proof.
  intros A r a b c H Ad; induction H; simpl.
  - reflexivity.
  - apply bcast_rev_nil_r.
  - rewrite (dim_bcast_sound A r x y z), IHrev_bcast; auto.
Qed.

Theorem broadcast_sound : forall A i a b c,
  shape_bcast A a b c -> inst_ok A i ->
  c_broadcast (inst_shape i a) (inst_shape i b) = Some (inst_shape i c).
Proof.
  intros A i a b c H [Ad _]; unfold c_broadcast, inst_shape.
  destruct H as [g1 g2 g a b c L H1 H2 | g a b c L H2 | g a b c L H2]; simpl;
    apply (rev_bcast_sound A (i_dims i)) in H2; auto;
    rewrite !rev_app_distr, <- !map_rev.
  - assert (Hg : exists t, bcast_rev
        (rev match g1 with Some g => i_groups i g | None => [] end)
        (rev match g2 with Some g => i_groups i g | None => [] end) = Some t
      /\ rev t = match g with Some g => i_groups i g | None => [] end).
    { destruct g1 as [x|], g2 as [y|]; simpl in H1.
      - destruct (String.eqb_spec x y); [|discriminate]; subst.
        injection H1 as <-; exists (rev (i_groups i y));
        rewrite bcast_rev_self, rev_involutive; auto.
      - injection H1 as <-; exists (rev (i_groups i x));
        rewrite bcast_rev_nil_r, rev_involutive; auto.
      - injection H1 as <-; exists (rev (i_groups i y)); rewrite rev_involutive; auto.
      - injection H1 as <-; exists []; auto. }
    destruct Hg as [t [Ht Hr]].
    rewrite (bcast_rev_app _ _ (map (eval_dim (i_dims i)) (rev c)) _ _ t); auto.
    + rewrite rev_app_distr, Hr, map_rev, rev_involutive; auto.
    + rewrite !map_length, !rev_length; auto.
  - rewrite (bcast_rev_long_l _ _ (map (eval_dim (i_dims i)) (rev c))); auto.
    + rewrite rev_app_distr, map_rev, !rev_involutive; auto.
    + rewrite !map_length, !rev_length; lia.
  - rewrite (bcast_rev_long_r _ _ (map (eval_dim (i_dims i)) (rev c))); auto.
    + rewrite rev_app_distr, map_rev, !rev_involutive; auto.
    + rewrite !map_length, !rev_length; lia.
Qed.

(** ** Dtype rules are sound under instantiation (dtype variables range over floats). *)
Lemma inst_weak : forall i d, is_weak (inst_dtype i d) = is_weak d.
Proof. destruct d; reflexivity. Qed.

Lemma join_dtype_inst : forall A i a b d,
  inst_ok A i -> join_dtype a b = Some d ->
  join_dtype (inst_dtype i a) (inst_dtype i b) = Some (inst_dtype i d).
Proof.
  intros A i a b d [_ [_ Fl]] H; unfold join_dtype, lit_meets in *.
  destruct a as [x|v| |], b as [y|w| |]; simpl in *;
    repeat match goal with
    | H : (if ?c then _ else _) = _ |- _ => let E := fresh "E" in destruct c eqn:E
    end; try discriminate; injection H as <-; simpl; rewrite ?Fl; auto;
    repeat match goal with
    | E : _ = true |- _ => rewrite E; clear E
    end; auto.
  all: repeat match goal with
    | E : base_eqb _ _ = true |- _ => apply base_eqb_eq in E; subst
    | E : String.eqb _ _ = true |- _ => apply String.eqb_eq in E; subst
    end; rewrite ?(proj2 (base_eqb_eq _ _) eq_refl); auto.
Qed.

Lemma join_dtype_weak : forall a b d,
  join_dtype a b = Some d -> is_weak d = true -> is_weak a = true /\ is_weak b = true.
Proof.
  intros a b d H W; unfold join_dtype, lit_meets in *.
  destruct a as [x|v| |], b as [y|w| |]; simpl in *;
    repeat match goal with
    | H : (if ?c then _ else _) = _ |- _ => destruct c
    end; try discriminate; try (split; reflexivity); injection H as <-; discriminate.
Qed.

Lemma bin_dtype_inst : forall A i k op d d',
  inst_ok A i -> bin_dtype k op d = Some d' ->
  bin_dtype k op (inst_dtype i d) = Some (inst_dtype i d').
Proof.
  intros A i k op d d' [_ [_ Fl]] H; unfold bin_dtype in *.
  destruct d as [x|v| |]; simpl in *;
    [ destruct x
    | pose proof (Fl v) as F; destruct (i_dtypes i v) eqn:E; simpl in F; try discriminate
    | | ];
    destruct (String.eqb op "eq"), (String.eqb op "pow"), k; simpl in *;
    try discriminate; injection H as <-; simpl; rewrite ?E; auto.
Qed.

Lemma bin_dtype_weak : forall k op d d',
  bin_dtype k op d = Some d' -> is_weak d' = true -> d' = d.
Proof.
  intros k op d d' H W; unfold bin_dtype in H.
  destruct (dtype_eqb d (DT Bool) && negb (String.eqb op "eq")); [discriminate|].
  destruct (String.eqb op "pow" && negb (float_like d)); [discriminate|].
  destruct k; injection H as <-; auto; discriminate.
Qed.

Lemma scalar_bcast : forall A s, shape_bcast A scalar scalar s -> s = scalar.
Proof.
  intros A s H; unfold scalar in H.
  inversion H as [g1 g2 g a b c L G R | g a b c L R | g a b c L R]; subst; simpl in *; try lia.
  injection G as <-; inversion R; subst;
    destruct c; simpl in *; auto;
    match goal with H : [] = _ ++ [_] |- _ => destruct (app_cons_not_nil _ _ _ H) end.
Qed.

(** ** Reductions are sound under instantiation. *)
Lemma remove_at_app : forall (l1 l2 : list nat) k,
  remove_at (List.length l1 + k) (l1 ++ l2) = l1 ++ remove_at k l2.
Proof.
  intros; unfold remove_at; rewrite firstn_app_2, skipn_app.
  replace (S (List.length l1 + k) - List.length l1) with (S k) by lia.
  rewrite (skipn_all2 l1) by lia; simpl; rewrite app_assoc; reflexivity.
Qed.

Lemma set_at_app : forall (l1 l2 : list nat) k v,
  set_at (List.length l1 + k) v (l1 ++ l2) = l1 ++ set_at k v l2.
Proof.
  intros; unfold set_at; rewrite firstn_app_2, skipn_app.
  replace (S (List.length l1 + k) - List.length l1) with (S k) by lia.
  rewrite (skipn_all2 l1) by lia; simpl; rewrite app_assoc; reflexivity.
Qed.

Lemma map_remove_at : forall (f : dim -> nat) k l, map f (remove_at k l) = remove_at k (map f l).
Proof. intros; unfold remove_at; rewrite map_app, firstn_map, skipn_map; reflexivity. Qed.


Lemma map_set_at : forall (f : dim -> nat) k v l,
  map f (set_at k v l) = set_at k (f v) (map f l).
Proof.
  intros; unfold set_at; rewrite map_app, firstn_map; cbn [map]; rewrite skipn_map; auto.
Qed.

Lemma axis_inst : forall s ax k (gl : list nat),
  s_axis s ax = Some k -> (group s = None -> gl = []) ->
  c_axis (List.length gl + List.length (fixed s)) ax = Some (List.length gl + k).
Proof.
  intros [[g|] ds] ax k gl H G; unfold s_axis in H; simpl in *.
  - destruct ax as [k0|k0]; [discriminate|]; unfold c_axis in *.
    destruct (1 <=? k0) eqn:E1, (k0 <=? List.length ds) eqn:E2; simpl in H;
      try discriminate; injection H as <-.
    apply Nat.leb_le in E1; apply Nat.leb_le in E2.
    simpl.
    destruct (Nat.leb_spec k0 (List.length gl + List.length ds)); [|lia].
    f_equal; lia.
  - rewrite (G eq_refl); simpl; exact H.
Qed.

Lemma reduce_dtype_inst : forall A i op d,
  inst_ok A i -> reduce_dtype_ok op d = true -> reduce_dtype_ok op (inst_dtype i d) = true.
Proof.
  intros A i op d [_ [_ Fl]] H; destruct d as [b|v| |]; simpl; auto.
  pose proof (Fl v) as F; unfold reduce_dtype_ok; simpl.
  destruct (i_dtypes i v); simpl in F; try discriminate; simpl;
    destruct (String.eqb op "mean"); reflexivity.
Qed.

Lemma reduce_inst : forall A i op keep ax t t',
  inst_ok A i -> s_reduce op keep ax t = Some t' ->
  c_reduce op keep ax (inst_ty i t) = Some (inst_ty i t') /\ is_weak (ty_dtype t') = false.
Proof.
  intros A i op keep ax [d [g ds] dv] t' Ok H; unfold s_reduce, c_reduce in *; simpl in *.
  destruct (reduce_dtype_ok op d) eqn:Ed; [|discriminate].
  destruct (s_axis (Shape g ds) ax) eqn:Ea; [|discriminate].
  injection H as <-; simpl.
  split; [|unfold reduce_dtype_ok in Ed; destruct (is_weak d); auto; discriminate].
  rewrite (reduce_dtype_inst A i op d Ok Ed).
  unfold inst_shape; simpl.
  set (gl := match g with Some g0 => i_groups i g0 | None => [] end).
  rewrite app_length, map_length.
  assert (Ax : c_axis (List.length gl + List.length ds) ax = Some (List.length gl + n)).
  { apply (axis_inst (Shape g ds) ax n gl Ea); simpl; intro; subst g; reflexivity. }
  rewrite Ax.
  destruct keep; unfold inst_ty, inst_shape; simpl; f_equal; f_equal; fold gl.
  - rewrite map_set_at, set_at_app; reflexivity.
  - rewrite map_remove_at, remove_at_app; reflexivity.
Qed.


(** ** [matmul] is sound under instantiation. *)
Lemma mm_dtype_inst : forall A i a b d,
  inst_ok A i -> mm_dtype a b = Some d ->
  mm_dtype (inst_dtype i a) (inst_dtype i b) = Some (inst_dtype i d) /\ is_weak d = false.
Proof.
  intros A i a b d [_ [_ Fl]] H; unfold mm_dtype in *.
  destruct (is_weak a || is_weak b) eqn:W; [discriminate|].
  destruct (dtype_eqb a b && negb (dtype_eqb a (DT Bool))) eqn:E; [|discriminate].
  injection H as <-; apply andb_prop in E as [E1 E2]; apply dtype_eqb_eq in E1; subst b.
  apply orb_false_elim in W as [W _]; split; auto.
  destruct a as [x|v| |]; simpl in *; try discriminate.
  - rewrite (proj2 (base_eqb_eq x x) eq_refl); simpl in *; rewrite E2; auto.
  - pose proof (Fl v) as F; destruct (i_dtypes i v); simpl in *; try discriminate; auto.
Qed.

Lemma c_broadcast_nil_r : forall a, c_broadcast a [] = Some a.
Proof. intro a; unfold c_broadcast; simpl; rewrite bcast_rev_nil_r, rev_involutive; auto. Qed.

Lemma inst_shape_snoc2 : forall i g ds x y,
  inst_shape i (Shape g (ds ++ [x; y]))
  = inst_shape i (Shape g ds) ++ [eval_dim (i_dims i) x; eval_dim (i_dims i) y].
Proof.
  intros; unfold inst_shape; cbn [group fixed]; rewrite map_app, app_assoc; reflexivity.
Qed.

Theorem mm_shape_sound : forall A i a b c,
  mm_shape A a b c -> inst_ok A i ->
  c_mm_shape (inst_shape i a) (inst_shape i b) = Some (inst_shape i c).
Proof.
  intros A i a b c H Ok; destruct H as [ga gb g ba bb bc m k k' n Hk Hb | g k k' n Hk].
  - rewrite !inst_shape_snoc2; unfold c_mm_shape.
    rewrite app_length; simpl List.length.
    replace (Nat.eqb (List.length (inst_shape i (Shape ga ba)) + 2) 1) with false
      by (symmetry; apply Nat.eqb_neq; lia).
    simpl; unfold c_mm_general; rewrite !rev_app_distr; simpl.
    rewrite !rev_involutive, (Hk _ (proj1 Ok)), Nat.eqb_refl.
    rewrite (broadcast_sound A i _ _ _ Hb Ok); reflexivity.
  - unfold inst_shape; cbn [group fixed map].
    rewrite (Hk _ (proj1 Ok)).
    destruct (i_groups i g) as [|x G] eqn:EG.
    + unfold c_mm_shape; simpl; rewrite Nat.eqb_refl; reflexivity.
    + unfold c_mm_shape; simpl.
      replace (Datatypes.length (G ++ [eval_dim (i_dims i) k']) =? 0) with false
        by (symmetry; apply Nat.eqb_neq; rewrite app_length; simpl; lia).
      simpl; unfold c_mm_general.
      replace (rev (x :: G ++ [eval_dim (i_dims i) k']))
        with (eval_dim (i_dims i) k' :: (rev G ++ [x]))
        by (simpl; rewrite rev_app_distr; reflexivity).
      destruct (rev G ++ [x]) as [|l rG] eqn:E.
      { destruct (app_cons_not_nil _ _ _ (eq_sym E)). }
      cbn [rev app]; rewrite Nat.eqb_refl; simpl; rewrite c_broadcast_nil_r.
      assert (HG : x :: G = rev rG ++ [l]).
      { rewrite <- (rev_involutive (x :: G)); simpl; rewrite E; reflexivity. }
      rewrite app_comm_cons, HG, <- app_assoc; reflexivity.
Qed.
