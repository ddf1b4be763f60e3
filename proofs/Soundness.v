(** * Soundness of the elementwise fragment: the symbolic rules are sound for every
    admissible instance (dims satisfying the [where] assumptions), and the instance's
    semantics enjoys progress and preservation. Together: subject reduction and progress
    for symbolically typed programs, with symbolic dims under assumptions. *)
From Coq Require Import List Arith String Bool Lia.
From Kina Require Import Dims Types Rules Lang.
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

(** ** Instantiation: a symbolically typed expression is typed at every admissible
    instance by the concrete rules. *)
Definition inst_ctx (i : inst) (G : ctx ty) : ctx cty :=
  map (fun p => (fst p, inst_ty i (snd p))) G.

Lemma lookup_inst : forall i G x,
  lookup (inst_ctx i G) x = option_map (inst_ty i) (lookup G x).
Proof.
  induction G as [|[y t] G IH]; intro x; simpl; auto.
  destruct (String.eqb x y); auto.
Qed.

Theorem instantiate : forall A G e t i,
  has_type A G e t -> inst_ok A i -> wf_ctx G ->
  wf_ty t /\ rt_type i (inst_ctx i G) e (inst_ty i t).
Proof.
  intros A G e t i H Ok; induction H; intro WG.
  - split; [apply (WG x t H)|]; apply R_Var; rewrite lookup_inst, H; auto.
  - split; [intro; auto|]; apply R_LitF.
  - split; [intro; auto|]; apply R_LitI.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    unfold s_unary in H0; destruct t as [dt sh dv]; simpl in *.
    destruct dt as [b|v| |].
    + destruct (is_float_base b) eqn:E; [|discriminate]; injection H0 as <-.
      split; auto; eapply R_Un; [exact R|]; unfold c_unary, inst_ty; simpl; rewrite E; auto.
    + injection H0 as <-; split; auto; eapply R_Un; [exact R|]; unfold c_unary, inst_ty; simpl.
      destruct Ok as [_ [_ Fl]]; rewrite Fl; auto.
    + injection H0 as <-; split; [intro; auto|].
      destruct (W eq_refl) as [Hs Hd]; simpl in Hs, Hd; subst.
      eapply R_Un; [exact R|]; reflexivity.
    + injection H0 as <-; split; [intro; auto|]; eapply R_Un; [exact R|]; reflexivity.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    split.
    + intro Hw; unfold s_cast in Hw; simpl in Hw; rewrite H in Hw; discriminate.
    + destruct t as [dt sh dv]; unfold s_cast; simpl in *.
      replace (inst_ty i (Ty d (if is_weak dt then scalar else sh) dv))
        with (c_cast (inst_dtype i d) (inst_ty i (Ty dt sh dv))).
      * apply R_Cast; auto.
      * unfold c_cast, inst_ty; simpl.
        destruct (is_weak dt) eqn:E; auto.
        destruct (W E) as [Hs _]; simpl in Hs; subst; auto.
  - destruct (IHhas_type1 WG) as [Wa Ra]; destruct (IHhas_type2 WG) as [Wb Rb].
    clear IHhas_type1 IHhas_type2.
    assert (Weak : is_weak d' = true ->
              d' = d /\ ty_shape ta = scalar /\ ty_shape tb = scalar /\ s = scalar
              /\ dev = DevAny).
    { intro Wd; pose proof (bin_dtype_weak _ _ _ _ H2 Wd) as E; subst d'.
      destruct (join_dtype_weak _ _ _ H1 Wd) as [W1 W2].
      destruct (Wa W1) as [S1 D1]; destruct (Wb W2) as [S2 D2].
      rewrite S1, S2 in H4; rewrite D1, D2 in H3; simpl in H3; injection H3 as <-.
      repeat split; auto; eapply scalar_bcast; eauto. }
    split.
    + intro Wr; unfold weak_result in Wr; simpl in Wr.
      destruct (is_weak d') eqn:Wd.
      * destruct (Weak eq_refl) as [_ [_ [_ [Hs Hd]]]]; subst; auto.
      * simpl in Wr; rewrite Wd in Wr; discriminate.
    + eapply R_Bin; [exact Ra | exact Rb |].
      unfold c_binary; simpl.
      rewrite (join_dtype_inst A i _ _ d Ok H1), (bin_dtype_inst A i k op d d' Ok H2), H3.
      rewrite (broadcast_sound A i _ _ s H4 Ok).
      unfold inst_ty; simpl; f_equal; f_equal.
      unfold weak_result; rewrite inst_weak.
      destruct (is_weak d') eqn:Wd; simpl; auto.
      destruct (Weak eq_refl) as [_ [_ [_ [Hs _]]]]; subst; reflexivity.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    destruct (reduce_inst A i op keep ax t t' Ok H0) as [C Nw].
    split; [intro Hw; rewrite Nw in Hw; discriminate|].
    eapply R_Red; [exact R | exact C].
  - destruct (IHhas_type1 WG) as [W1 R1].
    assert (WG' : wf_ctx ((x, t1) :: G)).
    { intros y u Hy; simpl in Hy; destruct (String.eqb y x); [injection Hy as <-; auto|].
      apply (WG y u Hy). }
    destruct (IHhas_type2 WG') as [W2 R2]; split; auto.
    eapply R_Let; [exact R1 | exact R2].
Qed.

(** ** Progress and preservation of one instance. *)
Lemma context_invariance : forall i G e t,
  rt_type i G e t -> forall G', (forall x, lookup G x = lookup G' x) -> rt_type i G' e t.
Proof.
  intros i G e t H; induction H; intros G' Eq; try (econstructor; eauto; fail).
  - apply R_Var; rewrite <- Eq; auto.
  - eapply R_Let; [apply IHrt_type1; auto | apply IHrt_type2].
    intro y; simpl; destruct (String.eqb y x); auto.
Qed.

Lemma substitution : forall i e G x v t,
  rt_type i ((x, v) :: G) e t -> rt_type i G (subst x v e) t.
Proof.
  intros i e;
    induction e as [z| | |c|op a IH|k op a IHa b IHb|d a IH|op kp ax a IH|z e1 IHe1 e2 IHe2];
    intros G y u t H; inversion H; subst; simpl; try (econstructor; eauto; fail).
  - simpl in H2; destruct (String.eqb_spec y z); subst.
    + rewrite String.eqb_refl in H2; injection H2 as <-; apply R_Val.
    + destruct (String.eqb_spec z y); [congruence|]; apply R_Var; auto.
  - destruct (String.eqb_spec y z); subst.
    + eapply R_Let; [apply IHe1; eauto|].
      eapply context_invariance; [exact H6|].
      intro w; simpl; destruct (String.eqb w z); auto.
    + eapply R_Let; [apply IHe1; eauto|]. apply IHe2.
      eapply context_invariance; [exact H6|].
      intro w; simpl; destruct (String.eqb_spec w z), (String.eqb_spec w y); subst; auto.
      congruence.
Qed.

Theorem preservation : forall i e e' t,
  rt_type i [] e t -> step i e e' -> rt_type i [] e' t.
Proof.
  intros i e e' t H S; revert t H.
  induction S; intros t Ht; inversion Ht; subst;
    try (econstructor; eauto; fail).
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    match goal with H1 : c_unary ?a = _, H2 : c_unary ?a = _ |- _ =>
      rewrite H1 in H2; injection H2 as <- end; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end; apply R_Val.
  - repeat match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst; clear H end.
    match goal with H1 : c_binary _ _ _ _ = _, H2 : c_binary _ _ _ _ = _ |- _ =>
      rewrite H1 in H2; injection H2 as <- end; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    assert (v' = t) by congruence; subst; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    apply substitution; auto.
Qed.

Theorem progress : forall i e t,
  rt_type i [] e t -> is_value e \/ exists e', step i e e'.
Proof.
  intros i e t H; remember (@nil (string * cty)) as G.
  induction H; subst.
  - discriminate.
  - right; eexists; apply S_LitF.
  - right; eexists; apply S_LitI.
  - left; eexists; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + inversion H; subst; eexists; apply S_Un; eauto.
    + eexists; apply S_UnC; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + eexists; apply S_Cast.
    + eexists; apply S_CastC; eauto.
  - right; destruct IHrt_type1 as [[va ->]|[a' S]]; auto.
    + destruct IHrt_type2 as [[vb ->]|[b' S]]; auto.
      * inversion H; inversion H0; subst; eexists; apply S_Bin; eauto.
      * eexists; apply S_BinR; eauto.
    + eexists; apply S_BinL; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + inversion H; subst; eexists; apply S_Red; eauto.
    + eexists; apply S_RedC; eauto.
  - right; destruct IHrt_type1 as [[v ->]|[e' S]]; auto.
    + eexists; apply S_Let.
    + eexists; apply S_LetC; eauto.
Qed.

(** ** The fragment's soundness, with symbolic dims under assumptions. *)

(** Subject reduction: a program typed symbolically under [A] keeps, after any number of
    steps of any admissible instance, the instance of its type. *)
Theorem subject_reduction : forall A e t i e',
  has_type A [] e t -> inst_ok A i -> multi i e e' -> rt_type i [] e' (inst_ty i t).
Proof.
  intros A e t i e' H Ok M.
  destruct (instantiate A [] e t i H Ok) as [_ R]; [intros x u Hx; discriminate|].
  simpl in R; clear H; induction M; auto.
  apply IHM; eapply preservation; eauto.
Qed.

(** Progress: such a program is never stuck: it is a value or it steps. *)
Theorem type_safety : forall A e t i e',
  has_type A [] e t -> inst_ok A i -> multi i e e' ->
  (exists v, e' = EVal v /\ v = inst_ty i t) \/ exists e'', step i e' e''.
Proof.
  intros A e t i e' H Ok M.
  pose proof (subject_reduction A e t i e' H Ok M) as R.
  destruct (progress i e' _ R) as [[v ->]|S]; auto.
  left; exists v; split; auto; inversion R; auto.
Qed.
